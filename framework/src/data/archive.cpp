// Reading dataset files: zip members (libzip) and whole text files, gzip-compressed by suffix
// (zlib), with truncated or corrupt archives reported as DataError naming the file.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fmt/ranges.h>
#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace attnlab::data {
namespace {

using ZipPtr = std::unique_ptr<zip_t, void (*)(zip_t*)>;

/// DataError "cannot read <path>: <why>" unless `path` is a regular file (libzip and zlib would
/// block on a FIFO, read a device forever or report a symlink loop as a bare system error).
void require_regular_file(const std::string& path) {
  const std::string why = files::problem(path, files::Want::File);
  ATTNLAB_CHECK(why.empty(), DataError, "cannot read {}: {}", path, why);
}

ZipPtr open_zip(const std::string& zip_path) {
  require_regular_file(zip_path);
  int err = 0;
  zip_t* z = zip_open(zip_path.c_str(), ZIP_RDONLY, &err);
  if (z == nullptr) {
    zip_error_t error;
    zip_error_init_with_code(&error, err);
    std::string msg = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw DataError(fmt::format("cannot open zip archive {}: {}", zip_path, msg));
  }
  return ZipPtr(z, [](zip_t* p) { zip_discard(p); });
}

std::vector<std::string> member_names(zip_t* z) {
  std::vector<std::string> names;
  const zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(z, static_cast<zip_uint64_t>(i), 0);
    if (name != nullptr) names.emplace_back(name);
  }
  return names;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_gzip(const std::string& path) {
  require_regular_file(path);
  gzFile gz = gzopen(path.c_str(), "rb");
  ATTNLAB_CHECK(gz != nullptr, DataError, "cannot open {}: {}", path, errno ? std::strerror(errno) : "out of memory");
  gzbuffer(gz, 1 << 17);
  std::string out;
  std::vector<char> buf(1 << 17);
  while (true) {
    const int got = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()));
    if (got < 0) {
      int code = 0;
      std::string msg = gzerror(gz, &code);
      gzclose_r(gz);
      throw DataError(fmt::format("corrupt gzip file {}: {} (after {} decompressed bytes)", path, msg, out.size()));
    }
    if (got == 0) break;
    if (out.size() + static_cast<size_t>(got) > kMaxTextBytes) {
      gzclose_r(gz);
      throw DataError(
          fmt::format("{} decompresses to more than the {} bytes a dataset file may have", path, kMaxTextBytes));
    }
    out.append(buf.data(), static_cast<size_t>(got));
  }
  // gzopen reads non-gzip data transparently; a .gz file must be gzip.
  const bool direct = gzdirect(gz) == 1;
  const int rc = gzclose_r(gz);
  ATTNLAB_CHECK(!direct, DataError, "{} is not a gzip file (expected the gzip magic bytes 1f 8b)", path);
  ATTNLAB_CHECK(rc == Z_OK, DataError, "corrupt gzip file {}: {} (after {} decompressed bytes)", path,
                rc == Z_BUF_ERROR ? "unexpected end of file (truncated?)" : zError(rc), out.size());
  return out;
}

}  // namespace

std::vector<std::string> list_zip_members(const std::string& zip_path) {
  ZipPtr z = open_zip(zip_path);
  return member_names(z.get());
}

std::string read_zip_member(const std::string& zip_path, const std::string& member) {
  ZipPtr z = open_zip(zip_path);
  const zip_int64_t index = zip_name_locate(z.get(), member.c_str(), 0);
  if (index < 0) {
    const auto names = member_names(z.get());
    throw DataError(fmt::format("zip archive {} has no member '{}'; it holds: {}", zip_path, member,
                                names.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(names, ", "))));
  }
  zip_stat_t st;
  zip_stat_init(&st);
  ATTNLAB_CHECK(zip_stat_index(z.get(), static_cast<zip_uint64_t>(index), 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE),
                DataError, "cannot read the size of '{}' in zip archive {}: {}", member, zip_path, zip_strerror(z.get()));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z.get(), static_cast<zip_uint64_t>(index), 0),
                                                       &zip_fclose);
  ATTNLAB_CHECK(f != nullptr, DataError, "cannot open '{}' in zip archive {}: {}", member, zip_path,
                zip_strerror(z.get()));
  ATTNLAB_CHECK(st.size <= kMaxTextBytes, DataError,
                "'{}' in zip archive {} has {} bytes (as its directory says), more than the {} a dataset file may "
                "have",
                member, zip_path, st.size, kMaxTextBytes);
  // st.size is what the archive's directory claims: the buffer grows with the data that arrives
  // instead of being allocated at that size up front (a damaged directory claimed gigabytes).
  std::string out;
  out.reserve(static_cast<size_t>(std::min<zip_uint64_t>(st.size, zip_uint64_t{64} << 20)));
  std::vector<char> buf(1 << 16);
  while (out.size() < st.size) {
    const auto want = static_cast<zip_uint64_t>(std::min<zip_uint64_t>(buf.size(), st.size - out.size()));
    const zip_int64_t got = zip_fread(f.get(), buf.data(), want);
    ATTNLAB_CHECK(got > 0, DataError, "cannot read '{}' in zip archive {} ({} of {} bytes read): {}", member,
                  zip_path, out.size(), st.size, got < 0 ? zip_file_strerror(f.get()) : "unexpected end of data");
    out.append(buf.data(), static_cast<size_t>(got));
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  if (ends_with(path, ".gz")) return read_gzip(path);
  std::string text;
  const std::string why = files::read_whole(path, kMaxTextBytes, "a dataset file", text);
  ATTNLAB_CHECK(why.empty(), DataError, "cannot read {}: {}", path, why);
  return text;
}

}  // namespace attnlab::data
