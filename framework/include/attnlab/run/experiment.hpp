#pragma once
// Runs one experiment file end to end: config -> plugins -> data -> model -> trainer -> results
// (docs/ARCHITECTURE.md, "The run room").
#include <attnlab/config/node.hpp>
#include <attnlab/config/schema.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnlab::run {

struct RunOptions {
  std::string experiment_path;
  std::vector<std::string> overrides;     // "a.b=value"
  std::vector<std::string> plugin_dirs;   // --plugin-path
  std::string command_line;               // recorded in the results file
  std::optional<std::string> results_path;  // --results (else results.path, else the default)
  /// --resume RUN.h5: continue that run from its checkpoint RUN.h5.ckpt/last.pt, appending to the
  /// same file (the trainer must support it: Trainer::can_resume).
  std::optional<std::string> resume_path;
  /// --overwrite: a new run may replace an existing results file (and its checkpoint folder) at
  /// results_path or results.path; without it the run refuses before anything is built.
  bool overwrite = false;
  bool quiet = false;
};

/// Options of the experiment file's top level (what `runner plugins` prints for "experiment").
config::Schema experiment_schema();

/// Exit codes: 0 completed, 1 failed (error printed), 2 diverged, 130 interrupted.
/// Throws ConfigError/PluginError/DataError for problems found before the results file exists.
int run_experiment(const RunOptions& options);

}  // namespace attnlab::run
