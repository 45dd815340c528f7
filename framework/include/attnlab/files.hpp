#pragma once
// Paths a user gives (an experiment file and its includes, --results, --resume, --plugin-path, a
// data dir or mirror, a results file to read, a plot's -o, a tokenizer model): one check of what
// the path is before anything opens it, and one bounded whole-file read. A symlink loop, a FIFO,
// a device or a /proc file is then one error naming the path, never a raw filesystem error, a
// read that blocks forever or std::bad_alloc.
//
//   if (auto why = files::problem(path, files::Want::File); !why.empty())
//     throw DataError(fmt::format("cannot read {}: {}", path, why));
//   std::string text;
//   if (auto why = files::read_whole(path, 4u << 20, "a config file", text); !why.empty()) ...
#include <cstdint>
#include <string>

namespace attnlab::files {

/// What a path must be (symlinks followed).
enum class Want {
  File,             // an existing regular file
  Directory,        // an existing directory
  FileToWrite,      // a regular file, or nothing yet (it will be created)
  DirectoryToMake,  // a directory, or nothing yet (it will be created)
};

/// Why `path` is not what `want` asks, as a phrase to follow "<path>: " or "<path> (", or "" when
/// it is. One of: "no such file", "no such directory", "it is a symlink to nothing", "it is a
/// symlink loop", "a directory on its way is a symlink loop", "it is a directory, not a regular
/// file", "it is a FIFO (named pipe), not a regular file", "it is a device, not a regular file",
/// "it is a socket, ...", "it is a regular file, not a directory", "a part of it is not a
/// directory", "its name is too long", "the path is empty", or the system's reason (e.g.
/// "Permission denied").
/// POSIX calls only, never std::filesystem (whose symbols libtorch also exports).
std::string problem(const std::string& path, Want want);

/// Reads the whole regular file `path` into `out` when it holds at most `max_bytes`. Returns "",
/// else why not: problem(path, Want::File), "it has N bytes, more than the M <limit_for> may
/// have" (from its size) or "it has more than the M bytes <limit_for> may have" (counted while
/// reading: /proc files report size 0), or a read error.
/// Never blocks on a FIFO and never allocates more than max_bytes (plus one read buffer).
std::string read_whole(const std::string& path, std::uint64_t max_bytes, const std::string& limit_for,
                       std::string& out);

}  // namespace attnlab::files
