#pragma once
// One URL into one file with libcurl, as a well-behaved client: a User-Agent, redirects followed,
// a dropped transfer resumed (HTTP Range) or retried a bounded number of times with a short
// backoff, progress on stderr for large files. Internal to ensure_file (fetch.cpp).
#include <attnlab/data/fetch.hpp>

#include <filesystem>
#include <string>

namespace attnlab::data::detail {

/// The User-Agent every download sends.
inline constexpr const char* kUserAgent = "attnlab/0.1";
/// Files at least this large show progress on stderr.
inline constexpr long long kProgressMinBytes = 4LL << 20;

/// Download `url` into `dest` (created or resumed), `file.attempts` transfers at most.
/// DataError naming file.relpath, the URL, the attempts made and the last failure.
void download(const std::string& url, const std::filesystem::path& dest, const RemoteFile& file);

}  // namespace attnlab::data::detail
