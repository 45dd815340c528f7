#include "cli/sweep_slurm.hpp"

#include <attnlab/error.hpp>

#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

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

namespace {

/// A Slurm command's output in one line: its lines trimmed and joined with "; ", each without the
/// "sbatch: error: " prefix Slurm puts on them, cut at 300 characters.
std::string gist(const std::string& out, const std::string& tool) {
  std::string joined, line;
  std::istringstream in(out);
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r"), last = line.find_last_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, last - first + 1);
    for (const auto& prefix : {tool + ": ", std::string("error: ")}) {
      if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
    }
    if (!line.empty()) joined += (joined.empty() ? "" : "; ") + line;
  }
  return joined.size() > 300 ? joined.substr(0, 297) + "..." : joined;
}

}  // namespace

std::string run_slurm_command(const std::string& tool, const std::vector<std::string>& args) {
  std::string command = tool;
  for (const auto& a : args) command += " " + shell_quote(a);
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  ATTNLAB_CHECK(p != nullptr, Error, "runner sweep: cannot run {}", tool);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const auto why = code == 127 ? fmt::format("{} is not installed or not on PATH", tool)
                   : gist(out, tool).empty() ? std::string("no output")
                                             : gist(out, tool);
  throw Error(fmt::format("runner sweep: {} failed (exit {}): {}", command, code, why));
}

std::string submit_slurm(const std::string& script_path) {
  const auto out = run_slurm_command("sbatch", {"--parsable", script_path});
  // The job id is the last line ("jobid" or "jobid;cluster"); warnings may come before it.
  std::string id, line;
  std::istringstream in(out);
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) id = line;
  }
  while (!id.empty() && (id.back() == '\r' || id.back() == ' ')) id.pop_back();
  return id.substr(0, id.find(';'));
}

}  // namespace attnlab::cli::sweep
