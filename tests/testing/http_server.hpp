#pragma once
// A local HTTP server for download tests: tests/testing/fetch_server.py (see its docstring for
// what each path does) run as a child process on 127.0.0.1, killed when the object goes away.
// Needs ATTNLAB_SOURCE_DIR (ctest sets it) and python3 (ATTNLAB_PYTHON, else python3 on PATH);
// without them port() is 0 and the test fails, it does not skip.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "testing/testing.hpp"

namespace attnlab::testutil {

class HttpServer {
 public:
  /// Serves the files under `root`.
  explicit HttpServer(const std::string& root) {
    const std::string python = env_or("ATTNLAB_PYTHON", "").empty() ? "python3" : env_or("ATTNLAB_PYTHON", "");
    const std::string script = env_or("ATTNLAB_SOURCE_DIR", "") + "/tests/testing/fetch_server.py";
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copy
      execlp(python.c_str(), python.c_str(), script.c_str(), root.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;  // the port, then '\n'; EOF when the server could not start
    char c = 0;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    port_ = line.empty() ? 0 : std::stoi(line);
  }
  ~HttpServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The listening port; 0 when the server did not start.
  int port() const { return port_; }
  /// http://127.0.0.1:<port>/<path>
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + "/" + path; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace attnlab::testutil
