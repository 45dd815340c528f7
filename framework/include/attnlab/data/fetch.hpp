#pragma once
// Getting dataset files: from ATTNLAB_DATA_MIRROR (a folder or file:// URL) or upstream URLs,
// into the data dir, verified by pinned SHA-1 / SHA-256 sums (or, where the dataset allows it, by
// a content check). Nothing partial is left under the final name.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::data {

struct RemoteFile {
  std::string relpath;            // path under the data dir and under the mirror, e.g. "fra-eng/fra-eng.zip"
  std::vector<std::string> urls;  // upstream sources, tried in this order after the mirror
  std::vector<std::string> sums;  // accepted checksums, lowercase hex: 40 digits SHA-1, 64 SHA-256;
                                  // empty = don't verify
  /// For a file that matches none of `sums`: returns "" to accept it anyway (with a warning naming
  /// its checksums) or why it is refused. Unset = refuse it (strict).
  std::function<std::string(const std::string& path)> content_check = {};
  int attempts = 3;      // transfers per URL; a dropped transfer resumes where it stopped
  int backoff_ms = 500;  // wait before the n-th retry: n * backoff_ms
};

/// Returns the local path of `file` under data_dir, fetching it when missing or not accepted:
/// mirror first (env ATTNLAB_DATA_MIRROR or `mirror` argument), else each upstream URL in turn
/// (libcurl: User-Agent, redirects, resume/retry, progress on stderr for large files).
/// DataError naming the file and every source tried with why it failed (expected vs found sums).
std::string ensure_file(const RemoteFile& file, const std::string& data_dir,
                        std::optional<std::string> mirror = std::nullopt);

/// "SHA-1" or "SHA-256" for a lowercase hex checksum of that length, else "".
std::string checksum_kind(const std::string& hex);

/// "" when ensure_file can download `url` (http://, https:// or file://), else why not.
std::string url_problem(const std::string& url);

/// Lowercase hex SHA-1 of a file (DataError if unreadable).
std::string sha1_file(const std::string& path);

/// Lowercase hex SHA-256 of a file (DataError if unreadable).
std::string sha256_file(const std::string& path);

/// The most bytes read_zip_member and read_text_file return (after decompression): a corpus of
/// this size is already far more than training here holds in memory; a bigger one (or a member or
/// gzip stream claiming more, a "bomb") is a DataError naming it, not std::bad_alloc.
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t{1} << 30;

/// Read one member of a zip archive into memory (DataError naming archive and member; the archive
/// must be a regular file, the member at most kMaxTextBytes).
std::string read_zip_member(const std::string& zip_path, const std::string& member);

/// Names of all members of a zip archive, in archive order (DataError naming the archive).
std::vector<std::string> list_zip_members(const std::string& zip_path);

/// Read a whole (optionally gzip-compressed, by .gz suffix) regular file of at most kMaxTextBytes
/// (decompressed) (DataError naming the file: missing, a symlink loop, a FIFO or device, too big,
/// truncated or corrupt gzip). The bytes as they are: check text with require_utf8(text, path).
std::string read_text_file(const std::string& path);

}  // namespace attnlab::data
