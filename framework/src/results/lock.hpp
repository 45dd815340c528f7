#pragma once
// The writer lock of a results file: "<file>.lock", holding the writer's pid, locked (flock) for
// as long as one process writes the file. Taken before the file is created or opened for writing,
// so a second run on the same path is refused before it can truncate a live run's file.
#include <optional>
#include <string>

namespace attnlab::results {

class WriterLock {
 public:
  /// Takes the lock of results file `path`. ResultsError "another run is writing <path> (pid N)"
  /// when a live process holds it; one naming the lock file when it cannot be created.
  explicit WriterLock(const std::string& path);
  ~WriterLock();  // removes the lock file, then releases the lock
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  /// "<path>.lock".
  static std::string lock_path(const std::string& results_path);
  /// The pid of the process writing `path` now (-1 when it has not written it yet), if any: a
  /// lock file left by a killed run is held by nobody and gives nothing.
  static std::optional<long> holder(const std::string& results_path);
  /// "pid N" or "pid unknown".
  static std::string who(std::optional<long> pid);

 private:
  std::string lock_path_;
  int fd_ = -1;
};

}  // namespace attnlab::results
