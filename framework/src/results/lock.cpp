#include "results/lock.hpp"

#include <attnlab/error.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace attnlab::results {
namespace {

/// The pid written in an open lock file, if it holds one.
std::optional<long> read_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return std::nullopt;
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  return pid > 0 ? std::optional<long>(pid) : std::nullopt;
}

}  // namespace

std::string WriterLock::who(std::optional<long> pid) {
  return pid && *pid > 0 ? fmt::format("pid {}", *pid) : std::string("pid unknown");
}

std::string WriterLock::lock_path(const std::string& results_path) { return results_path + ".lock"; }

WriterLock::WriterLock(const std::string& path) : lock_path_(lock_path(path)) {
  // A lock file can be removed by its holder between our open() and flock(): then we hold a lock
  // on a file nobody else can see, so check that the path still names what we locked, and retry.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ATTNLAB_CHECK(fd >= 0, ResultsError, "cannot create the lock file {} for results file {}: {}", lock_path_, path,
                  std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const auto pid = read_pid(fd);
      ::close(fd);
      ATTNLAB_CHECK(err != EWOULDBLOCK, ResultsError,
                    "another run is writing {} ({}); wait for it to end or choose another --results path", path,
                    who(pid));
      throw ResultsError(fmt::format("cannot lock {} for results file {}: {}", lock_path_, path, std::strerror(err)));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(lock_path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      const auto text = fmt::format("{}\n", static_cast<long>(::getpid()));
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
        const int err = errno;
        ::close(fd);
        throw ResultsError(fmt::format("cannot write the lock file {}: {}", lock_path_, std::strerror(err)));
      }
      fd_ = fd;
      return;
    }
    ::close(fd);  // removed or replaced under us: try again
  }
  throw ResultsError(fmt::format("cannot lock {}: the lock file keeps changing", lock_path_));
}

WriterLock::~WriterLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still locked: nobody can take a lock on it in between
  ::close(fd_);
}

std::optional<long> WriterLock::holder(const std::string& results_path) {
  const int fd = ::open(lock_path(results_path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<long> pid;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) pid = read_pid(fd).value_or(-1);
  ::close(fd);  // also releases a shared lock we got
  return pid;
}

}  // namespace attnlab::results
