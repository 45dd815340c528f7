// Getting dataset files into the data dir: already there with the right checksum, copied from
// the mirror (ATTNLAB_DATA_MIRROR or an explicit folder / file:// / http(s):// base), or
// downloaded from the upstream URL with libcurl. Every copy is written to a temporary name in the
// destination folder, verified, then renamed, so nothing partial ever has the final name.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>

#include <curl/curl.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>
#include <vector>

namespace attnlab::data {
namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool is_http(const std::string& s) { return starts_with(s, "http://") || starts_with(s, "https://"); }

std::string join_url(std::string base, const std::string& relpath) {
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" + relpath;
}

/// A temporary file next to `target` that is removed unless committed by rename.
class TempFile {
 public:
  explicit TempFile(const fs::path& target) {
    std::random_device rd;
    path_ = target;
    path_ += fmt::format(".part-{:08x}", rd());
  }
  ~TempFile() {
    std::error_code ec;
    if (!committed_) fs::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const fs::path& path() const { return path_; }
  void commit(const fs::path& target) {
    std::error_code ec;
    fs::rename(path_, target, ec);
    ATTNLAB_CHECK(!ec, DataError, "could not move {} to {}: {}", path_.string(), target.string(), ec.message());
    committed_ = true;
  }

 private:
  fs::path path_;
  bool committed_ = false;
};

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    ATTNLAB_CHECK(rc == CURLE_OK, DataError, "libcurl initialisation failed: {}", curl_easy_strerror(rc));
  });
}

size_t write_to_file(char* data, size_t size, size_t count, void* user) {
  return std::fwrite(data, size, count, static_cast<std::FILE*>(user)) * size;
}

/// Download `url` into `dest` (follows redirects, fails on HTTP errors >= 400).
void download(const std::string& url, const fs::path& dest, const std::string& what) {
  curl_init_once();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(dest.c_str(), "wb"), &std::fclose);
  ATTNLAB_CHECK(out != nullptr, DataError, "cannot write {} (fetching {}): {}", dest.string(), what,
                std::strerror(errno));
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
  ATTNLAB_CHECK(curl != nullptr, DataError, "libcurl could not create a handle to fetch {}", what);
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &write_to_file);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out.get());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);  // give up after 60 s without data
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "attnlab/0.1");
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    throw DataError(fmt::format("download of {} from {} failed: {}{}", what, url,
                                errbuf[0] ? errbuf : curl_easy_strerror(rc),
                                status >= 400 ? fmt::format(" (HTTP {})", status) : std::string()));
  }
  ATTNLAB_CHECK(std::fflush(out.get()) == 0, DataError, "cannot write {} (fetching {}): {}", dest.string(), what,
                std::strerror(errno));
}

void copy_file(const fs::path& from, const fs::path& to, const std::string& what) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot copy {} from {} to {}: {}", what, from.string(), to.string(), ec.message());
  // Mirrors are often read-only; the data dir copy must stay replaceable.
  fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
}

/// Fetch into a temp file via `fill`, verify, then rename onto `target`.
template <class Fill>
void fetch_verified(const RemoteFile& file, const fs::path& target, const std::string& source, Fill fill) {
  TempFile tmp(target);
  fill(tmp.path());
  if (!file.sha256.empty()) {
    const std::string found = sha256_file(tmp.path().string());
    ATTNLAB_CHECK(found == file.sha256, DataError, "checksum mismatch for {} from {}: expected {}, found {}",
                  file.relpath, source, file.sha256, found);
  }
  tmp.commit(target);
}

}  // namespace

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ATTNLAB_CHECK(in.good(), DataError, "cannot read {} to compute its SHA-256: {}", path, std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  ATTNLAB_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, DataError,
                "OpenSSL could not start a SHA-256 digest for {}", path);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (got > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(got));
  }
  ATTNLAB_CHECK(in.eof() && !in.bad(), DataError, "error while reading {} to compute its SHA-256", path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ATTNLAB_CHECK(EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1, DataError,
                "OpenSSL could not finish the SHA-256 digest of {}", path);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string ensure_file(const RemoteFile& file, const std::string& data_dir, std::optional<std::string> mirror) {
  ATTNLAB_CHECK(!file.relpath.empty() && fs::path(file.relpath).is_relative(), DataError,
                "dataset file path must be relative to the data dir, found '{}'", file.relpath);
  const fs::path target = fs::path(data_dir) / file.relpath;
  std::error_code ec;
  if (fs::is_regular_file(target, ec)) {
    if (file.sha256.empty() || sha256_file(target.string()) == file.sha256) return target.string();
    // Present but corrupt or another version: fetch again and replace it.
  }
  fs::create_directories(target.parent_path(), ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot create the folder {} for {}: {}", target.parent_path().string(),
                file.relpath, ec.message());

  if (!mirror) {
    const char* env = std::getenv("ATTNLAB_DATA_MIRROR");
    if (env != nullptr && *env != '\0') mirror = env;
  }
  std::vector<std::string> tried;
  if (mirror) {
    std::string base = *mirror;
    if (starts_with(base, "file://")) base = base.substr(7);
    if (is_http(base)) {
      const std::string url = join_url(base, file.relpath);
      try {
        fetch_verified(file, target, url, [&](const fs::path& tmp) { download(url, tmp, file.relpath); });
        return target.string();
      } catch (const DataError& e) {
        tried.push_back(e.what());  // fall back to the upstream URL below
      }
    } else {
      const fs::path src = fs::path(base) / file.relpath;
      if (fs::is_regular_file(src, ec)) {
        // A bad mirror copy is an error to fix, not something to paper over with a download.
        fetch_verified(file, target, src.string(),
                       [&](const fs::path& tmp) { copy_file(src, tmp, file.relpath); });
        return target.string();
      }
      tried.push_back(fmt::format("mirror {} has no {}", base, file.relpath));
    }
  }
  if (file.url.empty()) {
    throw DataError(fmt::format("cannot get {} into {}: {}; and no upstream URL is known", file.relpath, data_dir,
                                tried.empty() ? "no mirror set (ATTNLAB_DATA_MIRROR)" : fmt::format("{}", tried[0])));
  }
  try {
    fetch_verified(file, target, file.url, [&](const fs::path& tmp) { download(file.url, tmp, file.relpath); });
  } catch (const DataError& e) {
    if (tried.empty()) throw;
    throw DataError(fmt::format("{} (after: {})", e.what(), tried[0]));
  }
  return target.string();
}

}  // namespace attnlab::data
