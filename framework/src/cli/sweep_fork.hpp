#pragma once
// `runner sweep`'s fork server. Each run of a local sweep used to be a fresh runner process: exec,
// then LibTorch's own start (loading and relocating its libraries, registering its operators),
// about 0.35 s of a two-second corners run. The server is a child of the sweep, forked before the
// sweep has loaded a plugin or run a torch op; each run is forked from it and calls the runner's
// main with the argv an exec'd runner would get. No OpenMP pool, CUDA context, plugin or dataset
// exists in the server to be copied into a run.
//
// A run is still a process of its own (its own pid, process group, log, exit status) and a child
// of the sweep: the server forks it through a short-lived middle process, so that it is reparented
// to the sweep, which is a child subreaper. The sweep waits for it, signals it and marks it as it
// did an exec'd run. ATTNLAB_SWEEP_EXEC=1 turns the server off (every run exec'd afresh).
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace attnlab::cli::sweep {

class ForkServer {
 public:
  /// The runner's main (main.cpp): what a forked run calls.
  using Main = int (*)(int argc, char** argv);

  /// Forks the server, or returns nullptr (then every run is exec'd): ATTNLAB_SWEEP_EXEC=1, more
  /// than one thread in this process (forking it would copy locks held by the others), or a failed
  /// fork. Call it before anything loads a plugin or runs a torch op.
  static std::unique_ptr<ForkServer> start(Main main);

  /// Closes the server's socket (it exits) and reaps it.
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  /// A run forked from the server: `args` as its argv (args[0] the runner), in a process group of
  /// its own, stdin from /dev/null, stdout and stderr appended to `log` after `header` (exit 127
  /// when it cannot be opened), the signal dispositions and mask an exec'd runner would have, SIGTERM when the
  /// sweep dies, and a child of this process by the time it is returned. -1 when the server is
  /// gone or could not fork: then the caller execs the run.
  pid_t spawn(const std::vector<std::string>& args, const std::string& log, const std::string& header);

 private:
  ForkServer(pid_t pid, int socket) : pid_(pid), socket_(socket) {}
  pid_t pid_;
  int socket_;
};

}  // namespace attnlab::cli::sweep
