#pragma once
// `runner sweep`'s local launcher: the runs as child runner processes (forked from the fork server,
// sweep_fork.hpp, else exec'd: this same binary), --jobs at a time, each one's stdout and stderr
// appended to its log, the manifest rewritten on every change.
#include <cstddef>
#include <string>
#include <vector>

#include "cli/sweep_fork.hpp"
#include "cli/sweep_manifest.hpp"
#include "core/shell.hpp"

namespace attnlab::cli::sweep {

struct Job {
  size_t run = 0;       // index into Manifest::runs
  bool resume = false;  // `--resume RUN.h5` (its checkpoint exists) instead of `--results RUN.h5`
  /// `--overwrite` too: `runner sweep DIR --resume` runs it again from scratch, and what its results
  /// path holds is this sweep's own earlier attempt. A new sweep never replaces a file.
  bool replace = false;
};

struct LaunchOptions {
  int jobs = 1;
  bool fail_fast = false;  // after the first failed run: start no other, stop the running ones
  ForkServer* server = nullptr;  // forks the runs; without it (or once it is gone) each run is exec'd
};

/// The child's command line: runner, the experiment, the plain overrides, the run's axis overrides,
/// threads=N when the manifest gives threads, then --results or --resume and --plugin-path.
std::vector<std::string> run_command(const std::string& runner, const std::string& dir, const Manifest& m,
                                     const Job& job);

using attnlab::shell_quote;  // core/shell.hpp: `s` as one word for a POSIX shell

/// Runs the jobs. SIGINT/SIGTERM/SIGHUP to the sweep: SIGTERM to every running child (the runner
/// marks its results `interrupted`), wait for them, mark them in the manifest, return 130; no run
/// is left `running`. Otherwise 0 when every run completed (or diverged), 1 when any failed.
int run_local(const std::string& dir, Manifest& m, const std::vector<Job>& jobs, const LaunchOptions& options);

}  // namespace attnlab::cli::sweep
