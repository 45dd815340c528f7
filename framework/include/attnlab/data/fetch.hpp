#pragma once
// Getting dataset files: from ATTNLAB_DATA_MIRROR (a folder or file:// URL) or an upstream URL,
// into the data dir, verified by SHA-256. Nothing partial is left under the final name.
#include <optional>
#include <string>
#include <vector>

namespace attnlab::data {

struct RemoteFile {
  std::string relpath;  // path under the data dir and under the mirror, e.g. "fra-eng/fra-eng.zip"
  std::string url;      // upstream URL
  std::string sha256;   // expected checksum (lowercase hex); empty = don't verify
};

/// Returns the local path of `file` under data_dir, fetching it when missing or corrupt:
/// mirror first (env ATTNLAB_DATA_MIRROR or `mirror` argument), else the upstream URL (libcurl).
/// DataError naming the file, the source and expected vs found checksum on failure.
std::string ensure_file(const RemoteFile& file, const std::string& data_dir,
                        std::optional<std::string> mirror = std::nullopt);

/// Lowercase hex SHA-256 of a file (DataError if unreadable).
std::string sha256_file(const std::string& path);

/// Read one member of a zip archive into memory (DataError naming archive and member).
std::string read_zip_member(const std::string& zip_path, const std::string& member);

/// Names of all members of a zip archive, in archive order (DataError naming the archive).
std::vector<std::string> list_zip_members(const std::string& zip_path);

/// Read a whole (optionally gzip-compressed, by .gz suffix) file (DataError naming the file,
/// also for truncated/corrupt gzip).
std::string read_text_file(const std::string& path);

}  // namespace attnlab::data
