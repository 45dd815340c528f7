#pragma once
// A sweep folder's manifest, <folder>/sweep.yaml: the sweep (a `sweep:` block, so the manifest is
// itself a sweep file) and every expanded run with its files and status. Rewritten whole on every
// change (a temporary file renamed over it), so a reader never sees half of one.
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep_spec.hpp"

namespace attnlab::cli::sweep {

/// pending: not started; running: a child runner has it; completed / diverged: done (the runner's
/// exit 0 / 2); failed: any other exit, or killed by a signal the sweep did not send; interrupted:
/// stopped by the sweep (SIGINT/SIGTERM to it, or --fail-fast).
inline constexpr const char* kStatuses[] = {"pending", "running", "completed", "diverged", "failed", "interrupted"};

struct ManifestRun {
  std::string name;
  std::vector<std::string> overrides;  // the axis overrides ("key=value")
  std::string results, log;            // file names inside the folder
  std::string status = "pending";
  std::optional<int> exit_code;        // the runner's exit status (128 + signal when killed)
  std::string started, finished;       // UTC, ISO 8601
  double seconds = 0;                  // wall time of the last attempt
  int attempts = 0;                    // times started (a resume adds one)
};

struct Manifest {
  Spec spec;                              // experiment (absolute), axes, plain overrides
  std::string command_line, created;      // the sweep's first command line and its UTC time
  int jobs = 1;                           // --jobs of the last launch
  std::string launcher = "local";         // of the last launch: local or slurm
  std::string slurm_job;                  // the last sbatch job id (slurm)
  std::optional<int> threads;             // threads= given to each run (unset: the experiment sets it)
  std::vector<std::string> plugin_dirs;   // --plugin-path, passed to each run
  std::vector<ManifestRun> runs;
};

inline constexpr const char* kManifestName = "sweep.yaml";
/// The same manifest as JSON (config/json.hpp), written after sweep.yaml on every change, so that a
/// reader needs no YAML library (the Python package; docs/RESULTS.md). The runner reads sweep.yaml.
inline constexpr const char* kManifestJsonName = "sweep.json";

/// Writes <dir>/sweep.yaml, then <dir>/sweep.json, each through a .tmp file + rename. ResultsError
/// when it cannot.
void write_manifest(const std::string& dir, const Manifest& m);

/// Reads <dir>/sweep.yaml; ConfigError naming the place for anything malformed.
Manifest read_manifest(const std::string& dir);

/// The current UTC time as "2026-11-23T19:54:04Z".
std::string utc_now();

}  // namespace attnlab::cli::sweep
