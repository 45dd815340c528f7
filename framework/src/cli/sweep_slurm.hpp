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

/// Writes <dir>/sweep.sbatch and submits it with `sbatch --parsable`; returns the job id. Error
/// with sbatch's output when it fails or is not installed.
std::string submit_slurm(const std::string& script_path);

}  // namespace attnlab::cli::sweep
