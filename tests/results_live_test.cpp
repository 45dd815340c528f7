// Reading a live run (docs/RESULTS.md, "Reading a live run"): the writer holds the results file's
// lock only while it writes, so other processes open it between writes; a write waits for readers
// to close it, up to ATTNLAB_RESULTS_LOCK_WAIT, then goes on beside them; an epoch's metric rows
// appear together at its flush; a reader and the writer in one process share one lock. The other
// processes here are forked children that only flock() the file (what HDF5 and h5py do as they
// open it), and h5py itself.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

#include "results/lock.hpp"
#include "testing/testing.hpp"

namespace fs = std::filesystem;
using attnlab::results::FileShare;
using attnlab::results::Results;
using attnlab::results::ResultsReader;
using attnlab::testutil::ScopedEnv;

namespace {

class ResultsLive : public attnlab::testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    dir_ = attnlab::testutil::temp_dir("attnlab-live");
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string dir_;
};

/// Whether another process can take `mode` (LOCK_SH or LOCK_EX) on `path` right now: what an
/// HDF5 reader (shared) or writer (exclusive) in another process would get as it opens the file.
bool others_can_lock(const std::string& path, int mode) {
  const pid_t child = fork();
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    _exit(fd >= 0 && ::flock(fd, mode | LOCK_NB) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// A reader in another process: holds a shared lock on `path` from construction until release(),
/// then says so through a pipe that released() reads without waiting.
class ForeignReader {
 public:
  explicit ForeignReader(const std::string& path) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      const char held = fd >= 0 && ::flock(fd, LOCK_SH) == 0 ? 'h' : 'x';
      (void)!::write(from_child[1], &held, 1);
      char c;
      (void)!::read(to_child[0], &c, 1);  // until release()
      ::close(fd);                        // lets go of the lock
      (void)!::write(from_child[1], "r", 1);
      _exit(0);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_child_ = to_child[1];
    from_child_ = from_child[0];
    char held = 0;
    if (::read(from_child_, &held, 1) != 1 || held != 'h') throw std::runtime_error("the reader got no lock");
  }
  /// Tells the child to let go.
  void release() {
    if (!told_.exchange(true)) (void)!::write(to_child_, "x", 1);
  }
  /// Whether the child has let go already (without waiting for it).
  bool released() {
    pollfd p{from_child_, POLLIN, 0};
    char c;
    return ::poll(&p, 1, 0) == 1 && ::read(from_child_, &c, 1) == 1 && c == 'r';
  }
  ~ForeignReader() {
    release();
    ::close(to_child_);
    ::close(from_child_);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::atomic<bool> told_{false};
};

/// Runs a python snippet with $ATTNLAB_PYTHON; returns {exit code, output}.
std::pair<int, std::string> python(const std::string& code) {
  const std::string py = attnlab::testutil::env_or("ATTNLAB_PYTHON", "");
  const std::string cmd = "'" + py + "' -c \"" + code + "\" 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_F(ResultsLive, OtherProcessesOpenTheFileBetweenWrites) {
  const std::string py = attnlab::testutil::env_or("ATTNLAB_PYTHON", "");
  ATTNLAB_REQUIRE(!py.empty() && fs::exists(py), "the venv's python (ATTNLAB_PYTHON='" << py << "')");
  const std::string path = file("live.h5");
  Results r(path, "live");
  r.write_config("a: 1");
  for (int epoch = 0; epoch < 3; ++epoch) {
    r.append_metric("train", "loss", 3.0 - epoch);
    r.flush();
  }
  EXPECT_TRUE(others_can_lock(path, LOCK_SH));
  EXPECT_TRUE(others_can_lock(path, LOCK_EX));  // the writer holds nothing between writes
  // h5py opens a running run, as the docs show it, with swmr=True and without.
  for (const std::string mode : {"swmr=True", "swmr=False"}) {
    auto [code, out] = python("import h5py; f = h5py.File('" + path + "', 'r', " + mode +
                              "); s = f.attrs['status']; print(s.decode() if isinstance(s, bytes) else s, "
                              "f['metrics/train/loss'][:].tolist())");
    EXPECT_EQ(code, 0) << mode << ": " << out;
    EXPECT_NE(out.find("running [3.0, 2.0, 1.0]"), std::string::npos) << mode << ": " << out;
  }
}

TEST_F(ResultsLive, AnEpochsMetricRowsAppearTogetherAtItsFlush) {
  const std::string path = file("epoch.h5");
  Results r(path, "epoch");
  r.append_metric("train", "loss", 1.0);
  r.flush();
  r.append_metric("train", "loss", 0.5);
  r.append_metric("val", "loss", 0.7);
  r.append_metric("step", "lr", 1e-3);
  r.append_metric("step", "lr", 2e-3);
  // Counted before they are written: a resumed run's bookkeeping sees them.
  EXPECT_EQ(r.metric_rows(), (std::map<std::string, int64_t>{{"step/lr", 2}, {"train/loss", 2}, {"val/loss", 1}}));
  {
    ResultsReader before(path);  // in this process, which shares the file with the writer
    EXPECT_EQ(before.metric("train", "loss"), std::vector<double>{1.0});
  }
  r.flush();
  ResultsReader after(path);
  EXPECT_EQ(after.metric("train", "loss"), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(after.metric("val", "loss"), std::vector<double>{0.7});
  EXPECT_EQ(after.metric("step", "lr"), (std::vector<double>{1e-3, 2e-3}));
  // A resume cuts pending rows back too.
  r.append_metric("train", "loss", 0.25);
  r.truncate_metrics({{"train/loss", 1}, {"val/loss", 1}});
  EXPECT_EQ(r.metric_rows(), (std::map<std::string, int64_t>{{"train/loss", 1}, {"val/loss", 1}}));
}

TEST_F(ResultsLive, AWriteWaitsForAReaderToCloseTheFile) {
  ScopedEnv wait("ATTNLAB_RESULTS_LOCK_WAIT", "60");
  const std::string path = file("wait.h5");
  Results r(path, "wait");
  ForeignReader reader(path);
  EXPECT_FALSE(others_can_lock(path, LOCK_EX));
  r.append_metric("train", "loss", 1.0);  // kept in memory: nothing to wait for yet
  EXPECT_FALSE(reader.released());
  std::atomic<bool> asked{false};
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    asked = true;  // before the child is told: the writer can get the lock only after this
    reader.release();
  });
  r.flush();  // returns only once the reader has let go
  EXPECT_TRUE(asked) << "the write did not wait for the reader to close the file";
  later.join();
  EXPECT_EQ(ResultsReader(path).metric("train", "loss"), std::vector<double>{1.0});
}

TEST_F(ResultsLive, AReaderThatKeepsTheFileOpenIsWrittenBeside) {
  ScopedEnv wait("ATTNLAB_RESULTS_LOCK_WAIT", "0.2");
  const std::string path = file("beside.h5");
  {
    Results r(path, "beside");
    ForeignReader reader(path);  // a notebook holding the file open for the whole run
    for (int epoch = 0; epoch < 5; ++epoch) {
      r.append_metric("train", "loss", epoch);
      r.flush();
    }
    r.set_status(attnlab::results::Status::Completed);
    EXPECT_FALSE(reader.released());  // the run finished while the reader still had the file
  }
  ResultsReader in(path);
  EXPECT_EQ(in.status(), attnlab::results::Status::Completed);
  EXPECT_EQ(in.metric("train", "loss"), (std::vector<double>{0, 1, 2, 3, 4}));
}

TEST_F(ResultsLive, AReaderAndTheWriterInOneProcessShareOneLock) {
  ScopedEnv wait("ATTNLAB_RESULTS_LOCK_WAIT", "60");  // a lock this process held against itself would wait
  const std::string path = file("one.h5");
  Results r(path, "one");
  {
    ResultsReader in(path);
    EXPECT_FALSE(others_can_lock(path, LOCK_EX));  // the reader's shared lock
    EXPECT_TRUE(others_can_lock(path, LOCK_SH));
    r.append_metric("train", "loss", 1.0);
    r.flush();  // converts this process's lock, and goes back to shared for the reader
    EXPECT_FALSE(others_can_lock(path, LOCK_EX));
    EXPECT_TRUE(others_can_lock(path, LOCK_SH));
    EXPECT_TRUE(in.has_attr("status"));
  }
  EXPECT_TRUE(others_can_lock(path, LOCK_EX));  // reader closed, writer between writes
  {
    // Two FileShares of one file: one descriptor, one lock.
    FileShare a(path, FileShare::Role::reader), b(path, FileShare::Role::writer);
    EXPECT_TRUE(a.begin(0));
    EXPECT_TRUE(b.begin(0));
    EXPECT_FALSE(others_can_lock(path, LOCK_SH));
    b.end();
    EXPECT_TRUE(others_can_lock(path, LOCK_SH));
    EXPECT_FALSE(others_can_lock(path, LOCK_EX));
  }
  EXPECT_TRUE(others_can_lock(path, LOCK_EX));
}

TEST_F(ResultsLive, ABadWaitIsOneErrorNamingTheVariable) {
  ScopedEnv wait("ATTNLAB_RESULTS_LOCK_WAIT", "soon");
  const auto msg = attnlab::testutil::message_of<attnlab::ConfigError>([&] { Results r(file("bad.h5"), "bad"); });
  EXPECT_NE(msg.find("ATTNLAB_RESULTS_LOCK_WAIT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("soon"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(file("bad.h5")));  // refused before anything was written
}
