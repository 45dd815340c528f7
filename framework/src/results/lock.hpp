#pragma once
// The writer lock of a results file: "<file>.lock", holding the writer's pid, locked (flock) for
// as long as one process writes the file. Taken before the file is created or opened for writing,
// so a second run on the same path is refused before it can truncate a live run's file.
#include <optional>
#include <string>
#include <utility>

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
  /// "another run is writing <path> (pid N); wait for it to end or choose another --results path".
  static std::string busy(const std::string& results_path, std::optional<long> pid);

 private:
  std::string lock_path_;
  int fd_ = -1;
};

/// How a results file is shared between its writer and readers in other processes (docs/RESULTS.md,
/// "Reading a live run"): flock on the results file itself, the lock HDF5 and h5py take when they
/// open a file. The writer opens the file without HDF5's lock and takes this one exclusively only
/// while it writes (one call, or one flush), so between writes the file on disk is complete and
/// any HDF5 reader (h5py, `swmr=True` or not) may open it; a reader holds it shared while open.
/// One lock per file in this process, whatever number of readers and writers of it this process
/// has: a reader beside this process's own writer neither waits for it nor blocks it.
class FileShare {
 public:
  enum class Role { reader, writer };
  /// Joins this process's lock of `path` (opened, creating an empty file when `create`). Takes
  /// nothing yet. ResultsError when the file cannot be opened.
  FileShare(const std::string& path, Role role, bool create = false);
  ~FileShare();  // ends what this one holds
  FileShare(const FileShare&) = delete;
  FileShare& operator=(const FileShare&) = delete;

  /// Reader: shared; writer: exclusive. Waits up to `wait_seconds` for other processes to let go,
  /// then goes on without it and returns false (the caller decides what that means); true when
  /// held. A reader while this process writes the file holds it already.
  bool begin(double wait_seconds);
  /// Lets go of what begin() took (a writer goes back to shared while this process reads it).
  void end();

  /// The seconds to wait for a lock: ATTNLAB_RESULTS_LOCK_WAIT (0 to 3600), else 10.
  static double wait_seconds();

 private:
  std::pair<unsigned long, unsigned long> key_{};  // device, inode
  Role role_;
  bool active_ = false;
};

}  // namespace attnlab::results
