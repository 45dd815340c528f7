#pragma once
// `runner sweep --launcher slurm`: one `sbatch --array` job whose task i runs run i of the sweep
// (the same child command line the local launcher starts), its output appended to the run's log.
// The tasks do not write the manifest: `runner sweep DIR --resume` (or --dry-run with it) reads
// each run's state from its results file.
#include <string>
#include <vector>

#include "cli/sweep_local.hpp"
#include "cli/sweep_manifest.hpp"

namespace attnlab::cli::sweep {

/// The batch script: #SBATCH --array=0-(n-1)%jobs, the job name, --output into the folder, each
/// `extra` line as `#SBATCH <arg>`, then a `case` on SLURM_ARRAY_TASK_ID that execs the run.
std::string slurm_script(const std::string& runner, const std::string& dir, const Manifest& m,
                         const std::vector<Job>& jobs, const std::vector<std::string>& extra);

/// Runs a Slurm command (`tool args...`, its stderr with its stdout) and returns its output. When it
/// fails: one line, Error "runner sweep: <command> failed (exit N): <its lines joined with '; '>"
/// (Slurm's own "sbatch: error: " prefixes dropped), or that it is not installed (exit 127).
std::string run_slurm_command(const std::string& tool, const std::vector<std::string>& args);

/// Submits <dir>/sweep.sbatch with `sbatch --parsable`; returns the job id. Error as
/// run_slurm_command says when sbatch fails or is not installed.
std::string submit_slurm(const std::string& script_path);

}  // namespace attnlab::cli::sweep
