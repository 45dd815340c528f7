#include "results/lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <attnlab/error.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "core/env.hpp"

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

std::string WriterLock::busy(const std::string& results_path, std::optional<long> pid) {
  return fmt::format("another run is writing {} ({}); wait for it to end or choose another --results path",
                     results_path, who(pid));
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
      ATTNLAB_CHECK(err != EWOULDBLOCK, ResultsError, "{}", busy(path, pid));
      throw ResultsError(fmt::format("cannot lock {} for results file {}: {}", lock_path_, path, std::strerror(err)));
    }
    struct stat held {
    }, named{};
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

namespace {

/// This process's lock of one results file (FileShare): one descriptor, whatever number of readers
/// and writers of the file this process has, since flock locks of two descriptors of one process
/// conflict like those of two processes.
struct Shared {
  int fd = -1;
  int members = 0;  // FileShare objects joined
  int readers = 0;  // ... of them between begin() and end()
  int writers = 0;
  int held = LOCK_UN;  // what `fd` holds now
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::pair<unsigned long, unsigned long>, Shared>& registry() {
  static auto* shared = new std::map<std::pair<unsigned long, unsigned long>, Shared>();  // used at exit
  return *shared;
}

/// flock(fd, mode), retrying while another process holds a conflicting lock, for up to `wait` s.
bool take(int fd, int mode, double wait) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  for (;;) {
    if (::flock(fd, mode | LOCK_NB) == 0) return true;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Brings the descriptor's lock to what this process's active readers and writers need: exclusive
/// while it writes, shared while it only reads, none otherwise. Whether it holds that now.
bool settle(Shared& s, double wait) {
  const int want = s.writers > 0 ? LOCK_EX : s.readers > 0 ? LOCK_SH : LOCK_UN;
  if (want == s.held) return true;
  if (want == LOCK_UN) {
    ::flock(s.fd, LOCK_UN);
    s.held = LOCK_UN;
    return true;
  }
  if (take(s.fd, want, wait)) {
    s.held = want;
    return true;
  }
  // A failed conversion has dropped the lock held before it (flock(2)): ask for it back.
  s.held = s.held == LOCK_SH && take(s.fd, LOCK_SH, 0) ? LOCK_SH : LOCK_UN;
  return false;
}

}  // namespace

FileShare::FileShare(const std::string& path, Role role, bool create) : role_(role) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  ATTNLAB_CHECK(fd >= 0, ResultsError, "cannot open results file {} to share it: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw ResultsError(fmt::format("cannot look at results file {}: {}", path, std::strerror(err)));
  }
  key_ = {static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino)};
  std::lock_guard guard(registry_mutex());
  Shared& s = registry()[key_];
  if (s.fd < 0) {
    s.fd = fd;
  } else {
    ::close(fd);  // this process has the file already: one descriptor holds its lock
  }
  ++s.members;
}

FileShare::~FileShare() {
  end();
  std::lock_guard guard(registry_mutex());
  auto it = registry().find(key_);
  if (it == registry().end()) return;
  if (--it->second.members == 0) {
    ::close(it->second.fd);  // releases its lock
    registry().erase(it);
  }
}

bool FileShare::begin(double wait_seconds) {
  std::lock_guard guard(registry_mutex());
  Shared& s = registry()[key_];
  if (active_) return s.held == (role_ == Role::writer ? LOCK_EX : LOCK_SH) || s.held == LOCK_EX;
  active_ = true;
  if (role_ == Role::reader) {
    ++s.readers;
    if (s.writers > 0) return true;  // this process writes it: nothing to wait for
  } else {
    ++s.writers;
  }
  return settle(s, wait_seconds);
}

void FileShare::end() {
  std::lock_guard guard(registry_mutex());
  if (!active_) return;
  active_ = false;
  Shared& s = registry()[key_];
  --(role_ == Role::reader ? s.readers : s.writers);
  settle(s, 0);
}

double FileShare::wait_seconds() { return env::seconds("ATTNLAB_RESULTS_LOCK_WAIT", 0, 3600).value_or(10.0); }

}  // namespace attnlab::results
