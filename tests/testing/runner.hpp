#pragma once
// Running the real runner binary from tests: fork/exec in a folder, stdout/stderr captured.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.hpp"

namespace attnlab::testutil {

struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};

/// Whole file as a string ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `program args...` in `cwd`, capturing stdout/stderr through files in `scratch`. If
/// `on_start` is given it is called with the child's pid and its stdout file while the child runs
/// (to signal or kill it), before the child is reaped.
inline ProcessResult run_process(const std::string& program, const std::vector<std::string>& args,
                                 const std::string& cwd, const std::string& scratch,
                                 const std::function<void(pid_t, const std::string&)>& on_start = {}) {
  const auto out = scratch + "/stdout", err = scratch + "/stderr";
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(127);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  if (on_start) on_start(pid, out);
  int status = 0;
  waitpid(pid, &status, 0);
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

/// Trains experiments/tests/tiny_corners.yaml (3 epochs, a second or two) into `results` with
/// `overrides`, from the source dir, as the compare and report tests do in their suite setup.
inline ProcessResult train_tiny_corners(const std::string& runner, const std::string& source,
                                        const std::string& scratch, const std::string& results,
                                        const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> args{"experiments/tests/tiny_corners.yaml"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  for (const char* a : {"--results", results.c_str(), "-q"}) args.emplace_back(a);
  return run_process(runner, args, source, scratch);
}

/// The norm-first / norm-last pair of tiny corner runs: the first failure, else the second run.
inline ProcessResult train_norm_pair(const std::string& runner, const std::string& source, const std::string& scratch,
                                     const std::string& first, const std::string& last) {
  auto r = train_tiny_corners(runner, source, scratch, first);
  return r.exit_code == 0 ? train_tiny_corners(runner, source, scratch, last, {"model.norm=last"}) : r;
}

/// Base fixture for tests of the real runner binary. Fails unless run through ctest (which sets
/// ATTNLAB_RUNNER, ATTNLAB_SOURCE_DIR and ATTNLAB_TEST_DATA_DIR); each test gets a fresh scratch
/// folder named by scratch_prefix(). Tests that train on fra-eng start with REQUIRE_FRA_ENG().
class RunnerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = env_or("ATTNLAB_RUNNER", "");
    source_ = env_or("ATTNLAB_SOURCE_DIR", "");
    data_dir_ = env_or("ATTNLAB_TEST_DATA_DIR", "");
    ATTNLAB_REQUIRE(!runner_.empty() && !source_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)");
    tmp_ = temp_dir(scratch_prefix());
  }
  virtual std::string scratch_prefix() const { return "attnlab-runner"; }

  /// fra-eng can be had: a mirror is set or the zip is already in the test data folder.
  bool have_fra_eng() const {
    return !env_or("ATTNLAB_DATA_MIRROR", "").empty() || std::filesystem::exists(data_dir_ + "/fra-eng/fra-eng.zip");
  }

  /// Runs runner with args from the source dir, stdout/stderr captured; `on_start` as run_process.
  ProcessResult run(const std::vector<std::string>& args,
                    const std::function<void(pid_t, const std::string&)>& on_start = {}) {
    return run_process(runner_, args, source_, tmp_, on_start);
  }

  std::string runner_, source_, data_dir_, tmp_;
};

/// The arguments of a run of the data-free end-to-end config: `experiments/tests/tiny_synthetic.yaml
/// --results RESULTS EXTRA...`.
inline std::vector<std::string> tiny_synthetic(const std::string& results, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"experiments/tests/tiny_synthetic.yaml", "--results", results};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

#define REQUIRE_FRA_ENG() \
  ATTNLAB_REQUIRE(have_fra_eng(), "fra-eng: ATTNLAB_DATA_MIRROR is not set and no fra-eng data is present")

}  // namespace attnlab::testutil
