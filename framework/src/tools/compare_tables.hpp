#pragma once
// The tables `runner compare` prints for runs side by side, shared with `runner report`, which
// shows the same tables in its page: runs, metrics (final and best), evaluations, attention.
#include <string>
#include <vector>

#include "tools/runs.hpp"
#include "tools/table.hpp"

namespace attnlab::tools {

/// The short name of the i-th run in tables and legends: A, B, ..., Z, then R27, R28, ...
std::string run_id(size_t i);

/// run | experiment | status | differs | params | wall | file: one row per run.
Table runs_table(const std::vector<Run>& runs, const std::vector<std::string>& keys);
/// metric | value | A | B ...: final and best with the epoch (or optimizer step) each was reached.
Table metrics_table(const std::vector<Run>& runs, const std::vector<std::string>& metrics);
/// evaluation | decoding | A | B ...: sacreBLEU (and d2l's mean sentence BLEU) per run.
Table evals_table(const std::vector<Run>& runs);
/// module | layer | head | A | B ...: "mean entropy / max weight" per head.
Table attention_table(const std::vector<Run>& runs);

/// The files to read: each argument, a folder standing for the .h5 files directly inside it (a
/// sweep folder), sorted. Error for a folder without results files.
std::vector<std::string> expand_folders(const std::vector<std::string>& args);
/// --group-by: the completed runs; each other one is named on stderr ("<command>: <file> left out
/// of the groups: its status is 'failed'"). Error when none completed.
std::vector<Run> completed_runs(const std::vector<Run>& all, const std::string& command);

/// The tables' headings, as compare prints them above each table.
inline constexpr const char* kMetricsHeading = "Metrics (value @epoch; step/ series @optimizer step)";
inline constexpr const char* kEvalsHeading =
    "Evaluations (runner eval: sacreBLEU on the split / the same lowercased, d2l's mean sentence BLEU in "
    "parentheses; samples: the "
    "experiment's evaluate.samples)";
inline constexpr const char* kAttentionHeading =
    "Attention (mean entropy in nats over the real query tokens, <pad> rows left out / max weight, over the "
    "recorded samples)";
/// Above the grouped table: what its cells hold (Welch's test and Hedges' g for two groups).
std::string grouped_heading(size_t groups);

}  // namespace attnlab::tools
