// bin/runner: the front of the runner. The subcommands that only read results files (compare,
// plot, report, rollout) run here, in a program that links neither LibTorch nor plugins and so starts in
// milliseconds; everything else (running an experiment, eval, sweep, plugins, ...) is handed to the
// LibTorch part, libexec/attnlab/runner-torch, by exec: the same process (pid, signals, torchrun's
// view of it), arguments and environment.
//   runner EXPERIMENT.yaml [key.path=value ...] [--results PATH] [--resume RUN.h5] [--plugin-path DIR ...]
//   runner <subcommand> ...
#include <attnlab/error.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/runner_commands.hpp"
#include "tools/commands.hpp"

namespace {
namespace fs = std::filesystem;

int run_tool(const std::string& name, int argc, char** argv) {
  if (name == "compare") return attnlab::tools::cmd_compare(argc, argv);
  if (name == "plot") return attnlab::tools::cmd_plot(argc, argv);
  if (name == "rollout") return attnlab::tools::cmd_rollout(argc, argv);
  return attnlab::tools::cmd_report(argc, argv);
}

/// Replaces this process with runner-torch, the same arguments; returns only when that fails.
int hand_over(char** argv) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::cerr << "runner: cannot find its own path (/proc/self/exe): " << ec.message() << std::endl;
    return 1;
  }
  const fs::path part = (self.parent_path() / attnlab::cli::kLibtorchPart).lexically_normal();
  ::setenv(attnlab::cli::kFrontEnv, self.c_str(), 1);
  ::execv(part.c_str(), argv);
  const int err = errno;
  std::cerr << "runner: cannot start its LibTorch part " << part.string() << ": " << std::strerror(err)
            << " (it is built with the runner: rebuild, or reinstall attnlab)" << std::endl;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto* command = argc > 1 ? attnlab::cli::find_command(argv[1]) : nullptr;
  if (command == nullptr || command->needs_libtorch) return hand_over(argv);
  try {
    return run_tool(command->name, argc - 1, argv + 1);
  } catch (const std::exception& e) {
    return attnlab::tools::print_error(e);
  }
}
