// A local sweep's runs forked from its fork server (framework/src/cli/sweep_fork.hpp), with the real
// runner: their results files equal those of the same sweep with every run exec'd
// (ATTNLAB_SWEEP_EXEC=1); their logs hold no colour codes when the sweep has a terminal; runs that
// may use CUDA are exec'd; a forked run is the sweep's child in its own process group and dies with
// a sweep killed outright (marked interrupted); a server that is gone leaves the rest exec'd.
#include <attnlab/results/reader.hpp>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using testutil::contains;

const std::string kTiny = "experiments/tests/tiny_corners.yaml";

/// Fields of /proc/PID/stat after the command name: [0] state, [1] ppid, [2] pgrp. Empty when gone.
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return {};
  const auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f && fields.size() < 3;) fields.push_back(f);
  return fields;
}

bool running(pid_t pid) {
  const auto f = stat_fields(pid);
  return !f.empty() && f[0] != "Z";
}

/// The children of `pid` (/proc/PID/task/PID/children).
std::vector<pid_t> children(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<pid_t> out;
  for (long c; in >> c;) out.push_back(static_cast<pid_t>(c));
  return out;
}

/// The pid a run's results lock holds (results/lock.cpp writes it), 0 while there is none.
pid_t lock_holder(const std::string& results) {
  std::ifstream in(results + ".lock");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

/// `runner args...` from `cwd` with a pseudo-terminal as its stdin, stdout and stderr (TERM=xterm:
/// a user's terminal, where spdlog colours its console lines); what it printed, read until it ends.
testutil::ProcessResult run_on_terminal(const std::string& runner, const std::vector<std::string>& args,
                                        const std::string& cwd) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(127);
    setenv("TERM", "xterm", 1);
    std::vector<char*> argv{const_cast<char*>(runner.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(runner.c_str(), argv.data());
    _exit(127);
  }
  testutil::ProcessResult r;
  if (pid < 0) return r;
  char buf[4096];
  for (ssize_t n; (n = read(terminal, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);) {
    if (n > 0) r.out.append(buf, static_cast<size_t>(n));
  }  // EIO once nothing holds the terminal open
  close(terminal);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class SweepFork : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-sweep-fork"; }
};

TEST_F(SweepFork, ForkedRunsWriteWhatExecdRunsWrite) {
  const std::vector<std::string> grid{"sweep",  kTiny, "model.norm=first,last", "seed=3", "trainer.max_epochs=2",
                                      "--jobs", "2"};
  auto forked_args = grid, execd_args = grid;
  for (const auto* a : {"-o", "forked"}) forked_args.emplace_back(a);
  for (const auto* a : {"-o", "execd"}) execd_args.emplace_back(a);
  forked_args.back() = tmp_ + "/forked";
  execd_args.back() = tmp_ + "/execd";
  auto forked = run(forked_args);
  ASSERT_EQ(forked.exit_code, 0) << forked.out << forked.err;
  {
    testutil::ScopedEnv exec("ATTNLAB_SWEEP_EXEC", "1");
    auto execd = run(execd_args);
    ASSERT_EQ(execd.exit_code, 0) << execd.out << execd.err;
  }
  for (const char* norm : {"first", "last"}) {
    const auto name = fmt::format("model.norm={}", norm);  // seed=3 is a plain override, no axis
    const auto a_log = testutil::read_file(tmp_ + "/forked/" + name + ".log");
    const auto b_log = testutil::read_file(tmp_ + "/execd/" + name + ".log");
    EXPECT_TRUE(contains(a_log, "(forked) attempt 1:")) << a_log;
    EXPECT_FALSE(contains(b_log, "(forked)")) << b_log;
    EXPECT_TRUE(contains(a_log, "epoch 2/2")) << a_log;
    EXPECT_TRUE(contains(b_log, "epoch 2/2")) << b_log;
    results::ResultsReader a(tmp_ + "/forked/" + name + ".h5"), b(tmp_ + "/execd/" + name + ".h5");
    EXPECT_EQ(a.attr_string("status"), "completed");
    EXPECT_EQ(b.attr_string("status"), "completed");
    EXPECT_EQ(a.config(), b.config());
    EXPECT_EQ(a.attr_int("seed"), 3);
    // The same program on the same thread count: the same numbers, bit for bit.
    for (const auto& [split, metric] : {std::pair{"train", "loss"}, std::pair{"val", "loss"}}) {
      const auto x = a.metric(split, metric), y = b.metric(split, metric);
      ASSERT_EQ(x.size(), 2u) << split;
      EXPECT_EQ(x, y) << split << "/" << metric;
    }
  }
}

// A run that starts after its middle process has ended (a busy machine) still finds itself the
// sweep's child and runs: it once waited forever for a middle that was already gone.
TEST_F(SweepFork, ARunThatStartsAfterItsMiddleProcessEndedRuns) {
  testutil::ScopedEnv delay("ATTNLAB_SWEEP_FORK_TEST_DELAY_MS", "300");
  auto r = run({"sweep", kTiny, "seed=1,2", "trainer.max_epochs=1", "--jobs", "2", "-o", tmp_ + "/late"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* seed : {"1", "2"}) {
    const auto log = testutil::read_file(tmp_ + "/late/seed=" + seed + ".log");
    EXPECT_TRUE(contains(log, "(forked) attempt 1:")) << log;
    EXPECT_TRUE(contains(log, "epoch 1/1")) << log;
  }
}

// A sweep started from a terminal: its progress line rewrites itself there, and the runs' logs get
// no colour codes (spdlog chose colours for the sweep's terminal before the server forked them).
TEST_F(SweepFork, LogsOfASweepOnATerminalHaveNoColours) {
  const auto dir = tmp_ + "/terminal";
  auto r = run_on_terminal(runner_, {"sweep", kTiny, "seed=0,1", "trainer.max_epochs=1", "-o", dir}, source_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\r")) << r.out;  // the progress line, rewritten in place
  for (const char* seed : {"0", "1"}) {
    const auto log = testutil::read_file(fmt::format("{}/seed={}.log", dir, seed));
    EXPECT_TRUE(contains(log, "(forked) attempt 1:")) << log;
    EXPECT_TRUE(contains(log, "info completed")) << log;
    EXPECT_FALSE(contains(log, "\033[")) << log;
  }
}

// Runs that may use CUDA are exec'd as before the server (it has not been tried with CUDA): a
// run with `device: cuda` (which fails here without a GPU, and trains on one), and `auto` where
// CUDA is available; `auto` without CUDA is forked.
TEST_F(SweepFork, RunsThatMayUseCudaAreExecd) {
  run({"sweep", kTiny, "device=cuda", "seed=0", "trainer.max_epochs=1", "-o", tmp_ + "/cuda"});
  const auto cuda_log = testutil::read_file(tmp_ + "/cuda/run.log");
  EXPECT_TRUE(contains(cuda_log, "attempt 1:")) << cuda_log;
  EXPECT_FALSE(contains(cuda_log, "(forked)")) << cuda_log;
  auto r = run({"sweep", kTiny, "device=auto", "seed=0", "trainer.max_epochs=1", "-o", tmp_ + "/auto"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto auto_log = testutil::read_file(tmp_ + "/auto/run.log");
  EXPECT_TRUE(contains(auto_log, "attempt 1:")) << auto_log;
  EXPECT_EQ(contains(auto_log, "(forked)"), !contains(auto_log, "on cuda")) << auto_log;
}

// A forked run is the sweep's own child (reparented from the server's middle process) in a process
// group of its own; the sweep killed outright (SIGKILL: no handler forwards anything) takes it and
// the server with it, and the run marks its results interrupted.
TEST_F(SweepFork, KilledSweepTakesItsForkedRunsWithIt) {
  const auto dir = tmp_ + "/killed";
  std::vector<pid_t> runs;
  bool killed = false;
  auto r = run({"sweep", kTiny, "seed=0,1", "trainer.max_epochs=100000", "--jobs", "2", "-o", dir},
               [&](pid_t sweep, const std::string&) {
                 for (int i = 0; i < 1200 && !killed; ++i) {
                   std::this_thread::sleep_for(std::chrono::milliseconds(100));
                   const auto a = testutil::read_file(dir + "/seed=0.log"),
                              b = testutil::read_file(dir + "/seed=1.log");
                   if (!contains(a, "1/100000") || !contains(b, "1/100000")) continue;
                   for (const char* seed : {"0", "1"})
                     runs.push_back(lock_holder(fmt::format("{}/seed={}.h5", dir, seed)));
                   for (pid_t run : runs) {
                     const auto f = stat_fields(run);
                     EXPECT_EQ(f.size(), 3u) << run;
                     if (f.size() < 3) continue;
                     EXPECT_EQ(std::stol(f[1]), sweep) << "run " << run << " is not the sweep's child";
                     EXPECT_EQ(std::stol(f[2]), run) << "run " << run << " is not in its own process group";
                   }
                   EXPECT_EQ(children(sweep).size(), 3u) << "two runs and the server";
                   kill(sweep, SIGKILL);
                   killed = true;
                 }
                 if (!killed) kill(sweep, SIGKILL);
               });
  ASSERT_TRUE(killed) << r.err;
  ASSERT_EQ(runs.size(), 2u);
  for (pid_t run : runs) {
    ASSERT_GT(run, 0);
    for (int i = 0; i < 300 && running(run); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(running(run)) << "run " << run << " outlived its sweep";
  }
  for (const char* seed : {"0", "1"}) {
    EXPECT_EQ(results::ResultsReader(fmt::format("{}/seed={}.h5", dir, seed)).attr_string("status"), "interrupted");
  }
}

// The server killed before the first run starts: the sweep says so once and execs every run.
TEST_F(SweepFork, RunsAreExecdWhenTheServerIsGone) {
  const auto dir = tmp_ + "/gone";
  pid_t server = 0;
  auto r = run({"sweep", kTiny, "seed=0,1,2", "trainer.max_epochs=1", "-o", dir}, [&](pid_t sweep, const std::string&) {
    // The server is the sweep's first child in a process group of its own (a plugin check's child
    // is not), and it exists before any run's log does.
    for (int i = 0; i < 20000 && server == 0; ++i) {
      for (pid_t c : children(sweep)) {
        const auto f = stat_fields(c);
        if (f.size() == 3 && std::stol(f[2]) == c) server = c;
      }
      if (server == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (server != 0) kill(server, SIGKILL);
  });
  ASSERT_GT(server, 0) << "the sweep started no server";
  ASSERT_FALSE(fs::exists(dir + "/seed=0.log") && contains(testutil::read_file(dir + "/seed=0.log"), "(forked)"))
      << "the first run was forked before the server was killed: the test raced";
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("the fork server is gone"), r.err.rfind("the fork server is gone")) << r.err;
  EXPECT_TRUE(contains(r.err, "the fork server is gone")) << r.err;
  for (const char* seed : {"0", "1", "2"}) {
    const auto log = testutil::read_file(fmt::format("{}/seed={}.log", dir, seed));
    EXPECT_FALSE(contains(log, "(forked)")) << log;
    EXPECT_TRUE(contains(log, "epoch 1/1")) << log;
    EXPECT_EQ(results::ResultsReader(fmt::format("{}/seed={}.h5", dir, seed)).attr_string("status"), "completed");
  }
}

}  // namespace
