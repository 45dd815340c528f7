#include "cli/sweep_slurm.hpp"

#include <attnlab/error.hpp>

#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

namespace attnlab::cli::sweep {
namespace fs = std::filesystem;

std::string slurm_script(const std::string& runner, const std::string& dir, const Manifest& m,
                         const std::vector<Job>& jobs, const std::vector<std::string>& extra) {
  ATTNLAB_CHECK(!jobs.empty(), Error, "runner sweep: no run to submit");
  std::string s = "#!/bin/bash\n# runner sweep --launcher slurm: task i runs one run of the sweep in this folder.\n";
  s += fmt::format("#SBATCH --job-name={}\n", shell_quote("attnlab-sweep-" + fs::path(dir).filename().string()));
  s += fmt::format("#SBATCH --array=0-{}%{}\n", jobs.size() - 1, m.jobs);
  s += fmt::format("#SBATCH --output={}\n", shell_quote((fs::path(dir) / "slurm-%A_%a.out").string()));
  for (const auto& e : extra) s += "#SBATCH " + e + "\n";
  s += "set -u\ncase \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& r = m.runs[jobs[i].run];
    std::string command;
    for (const auto& a : run_command(runner, dir, m, jobs[i])) command += (command.empty() ? "" : " ") + shell_quote(a);
    const auto log = shell_quote((fs::path(dir) / r.log).string());
    s += fmt::format("  {})  # {}\n    echo \"==== $(date -u +%Y-%m-%dT%H:%M:%SZ) slurm job $SLURM_ARRAY_JOB_ID task {}: "
                     "{}\" >> {}\n    exec {} >> {} 2>&1 ;;\n",
                     i, r.name, i, r.name, log, command, log);
  }
  s += "  *) echo \"no run for task $SLURM_ARRAY_TASK_ID\" >&2; exit 1 ;;\nesac\n";
  return s;
}

std::string submit_slurm(const std::string& script_path) {
  const auto command = fmt::format("sbatch --parsable {} 2>&1", shell_quote(script_path));
  FILE* p = popen(command.c_str(), "r");
  ATTNLAB_CHECK(p != nullptr, Error, "runner sweep: cannot run sbatch");
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  ATTNLAB_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, Error,
                "runner sweep: sbatch failed ({}): {}", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                out.empty() ? std::string("no output (is Slurm installed?)") : out);
  return out.substr(0, out.find(';'));  // "jobid" or "jobid;cluster"
}

}  // namespace attnlab::cli::sweep
