#pragma once
// Running the real runner binary from tests: fork/exec in a folder, stdout/stderr captured.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace attnlab::testutil
