#pragma once
// The run's results file from its creation to its end status: where it goes, what the run says
// about itself (in one call), and how the run ends in it (docs/RESULTS.md).
#include <attnlab/results/results.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::run {

/// results/<experiment>-<UTC time>.h5, the experiment name kept to ASCII letters, digits, '-', '_'
/// and '.' (the rest, '/' included, become '_'), so it always lands in results/; "-2", "-3", ...
/// added when the name is taken.
std::string default_results_path(const std::string& experiment);

/// Before anything is fetched or built: ResultsError naming `path` when it cannot be this run's
/// results file (for --resume an existing regular file, else a regular file or nothing yet) or its
/// checkpoint folder cannot be one (a symlink loop, a file, a FIFO there). A new run (not resume)
/// also refuses a results file or checkpoint folder that already exists, naming the choices
/// (--resume, --overwrite, another --results), unless `overwrite`.
void check_results_path(const std::string& path, bool resume, bool overwrite);

/// The commit the runner was built from (cli's kBuildCommit, written at build time by
/// cmake/build_commit.cmake), recorded as every run's `git_commit`; "unknown" until it is set.
void set_build_commit(std::string commit);

/// What the results file says about the run before it trains, written by RunRecord::record.
struct RunAttributes {
  std::string command_line;  // command_line, or resume_command_line when `resumed`
  bool resumed = false;
  int64_t torchrun_restarts = 0;  // torchrun_restart_count, written when > 0 on a resume
  std::string description;
  int64_t seed = 0;
  std::string device, precision;
  std::string experiment_file;
  std::vector<std::string> plugins;  // the registry's plugins the run used
  int64_t num_parameters = 0;
  int64_t threads = 0;
  std::string threads_choice;    // threads_choice when `threads: auto` decided ("" = not written)
  int64_t world_size = 1;        // distributed_world_size
  std::string backend = "none";  // distributed_backend
  std::string config_yaml;       // /config: the experiment as it ran, every default filled in
  std::string config_json;       // /config_json: the same as JSON (config/json.hpp), for readers without YAML
};

class RunRecord {
 public:
  /// Creates `path` for a new run of `experiment`, or (`resume`) reopens it and marks it running
  /// again, its evaluations of the checkpoints that training will replace set aside. Takes the
  /// writer lock first: a second run on the path of a live one is refused and touches nothing.
  RunRecord(const std::string& path, const std::string& experiment, bool resume, bool quiet);

  results::Results& results() { return *results_; }
  const std::string& path() const { return path_; }

  /// Every attribute of `a` (with attnlab's and torch's versions, the commit the runner was built
  /// from and the one the experiment file lies in) and /config,
  /// flushed: the one place the run describes itself.
  void record(const RunAttributes& a);

  /// The run's end, each an exit code of run_experiment: interrupted (130: `interrupted_during`),
  /// diverged (2: `diverged`, and an error line), completed (0).
  int interrupted(const std::string& why);
  int diverged(const std::string& why);
  int completed();
  /// Marks the run failed with the one-line message (`error`); the caller rethrows.
  void failed(const std::exception& e);

 private:
  std::unique_ptr<results::Results> results_;
  std::string path_;
  bool quiet_;
};

}  // namespace attnlab::run
