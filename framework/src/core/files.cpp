// What a user-given path is (files.hpp), and a bounded whole-file read.
#include <attnlab/files.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

namespace attnlab::files {
namespace {

/// What a non-regular, non-directory file is ("a FIFO (named pipe)").
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

/// Why stat/open failed with `err` on `path`, for `want`; "" when a missing path is allowed.
std::string errno_problem(const std::string& path, int err, Want want) {
  const bool dir = want == Want::Directory || want == Want::DirectoryToMake;
  switch (err) {
    case ENOENT: {
      if (want == Want::FileToWrite || want == Want::DirectoryToMake) return "";
      struct stat lst {};
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) return "it is a symlink to nothing";
      return dir ? "no such directory" : "no such file";
    }
    case ELOOP: {
      struct stat lst {};
      const bool self = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
      return self ? "it is a symlink loop" : "a directory on its way is a symlink loop";
    }
    case ENOTDIR:
      return "a part of it is not a directory";
    case ENAMETOOLONG:
      return "its name is too long";
    default:
      return std::strerror(err);
  }
}

std::string mode_problem(mode_t mode, Want want) {
  const bool dir = want == Want::Directory || want == Want::DirectoryToMake;
  if (dir ? S_ISDIR(mode) : S_ISREG(mode)) return "";
  return fmt::format("it is {}, not {}", kind_of(mode), dir ? "a directory" : "a regular file");
}

/// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string problem(const std::string& path, Want want) {
  if (path.empty()) return "the path is empty";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_problem(path, errno, want);
  return mode_problem(st.st_mode, want);
}

std::string read_whole(const std::string& path, std::uint64_t max_bytes, const std::string& limit_for,
                       std::string& out) {
  if (auto why = problem(path, Want::File); !why.empty()) return why;
  // O_NONBLOCK: should the path have become a FIFO since the check, open() must not wait for a
  // writer; the mode is checked again on what was opened.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) return errno_problem(path, errno, Want::File);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return std::strerror(errno);
  if (auto why = mode_problem(st.st_mode, Want::File); !why.empty()) return why;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return fmt::format("it has {} bytes, more than the {} {} may have", st.st_size, max_bytes, limit_for);
  }
  try {
    out.clear();
    out.reserve(static_cast<size_t>(st.st_size));
    std::vector<char> buf(1 << 16);
    while (true) {
      const ssize_t got = ::read(f.fd, buf.data(), buf.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return fmt::format("cannot read it: {}", std::strerror(errno));
      if (got == 0) break;
      // Counted while reading: a /proc file reports size 0 and a file may grow.
      if (out.size() + static_cast<size_t>(got) > max_bytes) {
        return fmt::format("it has more than the {} bytes {} may have", max_bytes, limit_for);
      }
      out.append(buf.data(), static_cast<size_t>(got));
    }
  } catch (const std::bad_alloc&) {
    out.clear();
    out.shrink_to_fit();
    return fmt::format("not enough memory to read its {} bytes", st.st_size);
  }
  return "";
}

}  // namespace attnlab::files
