// Getting dataset files into the data dir: already there with the right checksum, copied from
// the mirror (ATTNLAB_DATA_MIRROR or an explicit folder / file:// / http(s):// base), or
// downloaded from the upstream URLs in turn (download.cpp). Every copy is written to a temporary
// name in the destination folder, verified, then renamed, so nothing partial ever has the final name.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include "data/download.hpp"

#include <fmt/ranges.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
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

void copy_file(const fs::path& from, const fs::path& to, const std::string& what) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot copy {} from {} to {}: {}", what, from.string(), to.string(), ec.message());
  // Mirrors are often read-only; the data dir copy must stay replaceable.
  fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
}

/// Lowercase hex digest of a file with `md` (`name` in messages).
std::string hex_digest(const std::string& path, const EVP_MD* md, const char* name) {
  std::ifstream in(path, std::ios::binary);
  ATTNLAB_CHECK(in.good(), DataError, "cannot read {} to compute its {}: {}", path, name, std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  ATTNLAB_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), md, nullptr) == 1, DataError,
                "OpenSSL could not start a {} digest for {}", name, path);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (got > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(got));
  }
  ATTNLAB_CHECK(in.eof() && !in.bad(), DataError, "error while reading {} to compute its {}", path, name);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ATTNLAB_CHECK(EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1, DataError,
                "OpenSSL could not finish the {} digest of {}", name, path);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string describe(const std::string& sum) { return fmt::format("{} ({})", sum, checksum_kind(sum)); }

/// Whether a file is acceptable: `refusal` says why not; a file accepted by the content check
/// alone carries a `warning`, shown once per process for each (file, checksums) `key`.
struct Verdict {
  std::string refusal = {}, warning = {}, key = {};
};

Verdict verify(const RemoteFile& file, const fs::path& path, const std::string& source) {
  if (file.sums.empty()) return {};
  std::vector<std::string> found;  // the file's sum of each pinned kind, SHA-256 first
  for (const std::string kind : {"SHA-256", "SHA-1"}) {
    const bool pinned = std::any_of(file.sums.begin(), file.sums.end(),
                                    [&](const std::string& s) { return checksum_kind(s) == kind; });
    if (!pinned) continue;
    const std::string sum = kind == "SHA-1" ? sha1_file(path.string()) : sha256_file(path.string());
    if (std::find(file.sums.begin(), file.sums.end(), sum) != file.sums.end()) return {};
    found.push_back(describe(sum));
  }
  std::vector<std::string> expected;
  for (const auto& s : file.sums) expected.push_back(describe(s));
  const std::string sums = fmt::format("expected {}, found {}", fmt::join(expected, " or "), fmt::join(found, ", "));
  const std::string mismatch = fmt::format("checksum mismatch for {} from {}: {}", file.relpath, source, sums);
  if (!file.content_check) return {mismatch};
  std::string why;
  try {
    why = file.content_check(path.string());
  } catch (const DataError& e) {
    why = e.what();
  }
  if (!why.empty()) return {fmt::format("{}; and its content is not usable: {}", mismatch, why)};
  return {"",
          fmt::format("{} from {} matches no pinned checksum ({}); accepted after checking its content",
                      file.relpath, source, sums),
          fmt::format("{} {}", file.relpath, fmt::join(found, " "))};
}

/// Shows a verdict's warning on stderr, once per process for its key.
void warn_once(const Verdict& verdict) {
  static std::mutex mutex;
  static std::set<std::string> shown;
  if (verdict.warning.empty()) return;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!shown.insert(verdict.key).second) return;
  std::fprintf(stderr, "warning: %s\n", verdict.warning.c_str());
  std::fflush(stderr);
}

/// Fetch into a temp file via `fill`, verify, then rename onto `target`.
template <class Fill>
void fetch_verified(const RemoteFile& file, const fs::path& target, const std::string& source, Fill fill) {
  TempFile tmp(target);
  fill(tmp.path());
  const Verdict verdict = verify(file, tmp.path(), source);
  ATTNLAB_CHECK(verdict.refusal.empty(), DataError, "{}", verdict.refusal);
  tmp.commit(target);
  warn_once(verdict);
}

}  // namespace

std::string checksum_kind(const std::string& hex) {
  const bool lower_hex =
      std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!lower_hex) return "";
  return hex.size() == 40 ? "SHA-1" : hex.size() == 64 ? "SHA-256" : "";
}

std::string url_problem(const std::string& url) {
  if (is_http(url) || starts_with(url, "file://")) return "";
  return fmt::format("'{}' is not an http://, https:// or file:// URL", url);
}

std::string sha1_file(const std::string& path) { return hex_digest(path, EVP_sha1(), "SHA-1"); }

std::string sha256_file(const std::string& path) { return hex_digest(path, EVP_sha256(), "SHA-256"); }

std::string ensure_file(const RemoteFile& file, const std::string& data_dir, std::optional<std::string> mirror) {
  ATTNLAB_CHECK(!file.relpath.empty() && fs::path(file.relpath).is_relative(), DataError,
                "dataset file path must be relative to the data dir, found '{}'", file.relpath);
  for (const auto& s : file.sums) {
    ATTNLAB_CHECK(!checksum_kind(s).empty(), DataError,
                  "pinned checksum '{}' for {} is neither a SHA-1 nor a SHA-256 (lowercase hex)", s, file.relpath);
  }
  // A data dir or mirror that is a symlink loop (or a file) is named here, not in a raw
  // filesystem error from create_directories.
  if (const auto why = files::problem(data_dir, files::Want::DirectoryToMake); !why.empty()) {
    throw DataError(fmt::format("cannot use the data dir {} for {}: {}", data_dir, file.relpath, why));
  }
  const fs::path target = fs::path(data_dir) / file.relpath;
  std::error_code ec;
  if (fs::is_regular_file(target, ec)) {
    const Verdict verdict = verify(file, target, target.string());
    if (verdict.refusal.empty()) {
      warn_once(verdict);
      return target.string();
    }
    // Present but corrupt or another version: fetch again and replace it.
  }
  fs::create_directories(target.parent_path(), ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot create the folder {} for {}: {}", target.parent_path().string(),
                file.relpath, ec.message());

  if (!mirror) {
    const char* env = std::getenv("ATTNLAB_DATA_MIRROR");
    if (env != nullptr && *env != '\0') mirror = env;
  }
  std::vector<std::string> tried;  // why each source failed, in order
  const auto try_download = [&](const std::string& url) {
    try {
      fetch_verified(file, target, url, [&](const fs::path& tmp) { detail::download(url, tmp, file); });
      return true;
    } catch (const DataError& e) {
      tried.emplace_back(e.what());
      return false;
    }
  };
  if (mirror) {
    std::string base = *mirror;
    if (starts_with(base, "file://")) base = base.substr(7);
    if (is_http(base)) {
      if (try_download(join_url(base, file.relpath))) return target.string();
    } else {
      if (const auto why = files::problem(base, files::Want::Directory); why != "no such directory") {
        ATTNLAB_CHECK(why.empty(), DataError, "cannot use the data mirror {} (ATTNLAB_DATA_MIRROR) for {}: {}", base,
                      file.relpath, why);
      }
      const fs::path src = fs::path(base) / file.relpath;
      const auto why = files::problem(src.string(), files::Want::File);
      // A mirror entry that is there but no file (a FIFO, a device, a loop) is refused by name:
      // copying it would block or never end.
      ATTNLAB_CHECK(why.empty() || why == "no such file", DataError, "cannot copy {} from the data mirror: {}: {}",
                    file.relpath, src.string(), why);
      if (why.empty()) {
        // A bad mirror copy is an error to fix, not something to paper over with a download.
        fetch_verified(file, target, src.string(),
                       [&](const fs::path& tmp) { copy_file(src, tmp, file.relpath); });
        return target.string();
      }
      tried.push_back(fmt::format("mirror {} has no {}", base, file.relpath));
    }
  }
  for (const auto& url : file.urls) {
    if (try_download(url)) return target.string();
  }
  if (file.urls.empty()) {
    tried.emplace_back(mirror ? "no upstream URL is known" : "no mirror set (ATTNLAB_DATA_MIRROR) and no upstream URL is known");
  }
  std::string why;
  for (size_t i = 0; i < tried.size(); ++i) why += fmt::format("{}{}) {}", i ? "; " : "", i + 1, tried[i]);
  throw DataError(fmt::format("cannot get {} into {}: {}", file.relpath, data_dir, why));
}

}  // namespace attnlab::data
