#pragma once
// What `runner compare` and `runner plot` read from a results file: status, flattened config,
// metric series, wall time, parameter count and attention statistics.
#include <attnlab/config/node.hpp>

#include "core/duration.hpp"
#include "tools/head_views.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::tools {

/// Attention of one module/layer/head over every recorded sample.
struct HeadStats {
  double entropy = 0;     // mean over samples and queries of -sum_k w log w (nats)
  double max_weight = 0;  // largest weight seen
  int64_t samples = 0;
};
/// "encoder_self" -> layer (as stored: the layers attribute) -> head -> stats
using AttentionStats = std::map<std::string, std::map<int64_t, std::map<int64_t, HeadStats>>>;

/// One `runner eval` result (/eval/<name>).
struct EvalScore {
  double bleu = 0;           // sacreBLEU corpus score
  std::optional<double> bleu_lowercase;  // the same, lowercased (sacreBLEU -lc); older files lack it
  double d2l_mean_bleu = 0;  // mean of d2l's sentence BLEU
  std::string split, decoding, checkpoint;
  int64_t beam_size = 1, sentences = 0;
  std::optional<double> length_penalty;  // beam search's GNMT alpha, when the file has it
  bool length_penalty_tuned = false;      // picked on val (runner eval --tune-length-penalty)
};

struct Run {
  std::string path, experiment, status, started, finished;
  std::optional<double> wall_seconds;  // finished - started, or the epochs' sum while unfinished
  bool wall_partial = false;           // true when the run has not finished (sum of epochs so far)
  std::optional<int64_t> num_parameters;
  std::map<std::string, std::string> config;           // flattened "model.norm" -> "first"
  std::map<std::string, std::vector<double>> metrics;  // "train/loss" -> one value per row
  std::vector<double> epochs;                          // /metrics/epoch/index when present
  AttentionStats attention;
  std::map<std::string, EvalScore> evals;  // "test", "test_beam5", ...
  /// /samples: the experiment's evaluate.samples translated at the end of training; the mean of
  /// their d2l sentence BLEU (d2l's "mean BLEU" over its example sentences), and how many.
  std::optional<double> samples_mean_bleu;
  int64_t samples = 0;
  std::vector<HeadAblation> ablations;  // /ablation/<name> (runner ablate), sorted by name
  std::vector<PruningCurve> pruning;    // /pruning/<name> (runner prune), sorted by name
  std::vector<HeadScoreGrid> head_scores;  // /head_scores (runner heads, trainer.head_scores_every)
};

/// Reads everything compare needs. ResultsError (from ResultsReader) for files that are not
/// attnlab results files; a config that does not parse is kept as one key "<config>".
Run load_run(const std::string& path);

/// YAML tree -> "a.b.c" -> scalar text; sequences as "a[0]", an empty map/sequence as "{}"/"[]".
std::map<std::string, std::string> flatten(const config::Node& node);

/// Keys whose value differs between runs (absent counts as a value), sorted, leaving out what
/// always differs between experiments or machines: experiment, description, results.path, data_dir.
std::vector<std::string> differing_keys(const std::vector<Run>& runs);

/// "model.norm=first, model.num_blks=2" for the differing keys ("" when none).
/// With limits (tables, legends): at most `max_keys` keys, then "+N more", and values cut to
/// `max_value` characters with "...": unrelated runs differ in dozens of long keys.
std::string differs_text(const Run& run, const std::vector<std::string>& keys, size_t max_keys = SIZE_MAX,
                         size_t max_value = SIZE_MAX);
/// Whether a metric is recorded per optimizer step (`step/lr`), not per epoch.
bool per_step(const std::string& metric);
/// Legend label: differs_text, or the experiment name when nothing differs.
std::string run_label(const Run& run, const std::vector<std::string>& keys);

/// Metrics every run has, sorted; bookkeeping series (epoch/*, */seconds) left out.
std::vector<std::string> shared_metrics(const std::vector<Run>& runs);
/// Metrics any run has, sorted; bookkeeping series left out as in shared_metrics.
std::vector<std::string> all_metrics(const std::vector<Run>& runs);
/// Selects metrics by "group/name" or by bare "name" (every group that has it). Error naming the
/// available metrics when one matches nothing.
std::vector<std::string> select_metrics(const std::vector<std::string>& available,
                                        const std::vector<std::string>& wanted);

/// Higher is better for BLEU, accuracy and throughput; lower for everything else (losses).
bool higher_is_better(const std::string& metric);

struct MetricSummary {
  double final_value = 0, best = 0;
  int64_t final_epoch = 0, best_epoch = 0;  // from epoch/index; a one-value series: the last epoch; else row + 1
  bool valid = false;                       // false when the series is empty or all NaN
};
MetricSummary summarize(const Run& run, const std::string& metric);
/// The epoch of row `row` of a series with `rows` values: epoch/index when the series has a value
/// per epoch, the last epoch for a single value (a test loss), else row + 1 (optimizer steps).
int64_t row_epoch(const Run& run, size_t rows, size_t row);

/// A step-counted run's optimizer step after each report (its train/step series, the lm trainer's
/// with max_steps), when a per-epoch series of `rows` rows has one value per report; nullptr
/// otherwise (an epoch-counted run). The curves of such a run are drawn against it.
const std::vector<double>* report_steps(const Run& run, size_t rows);

/// Every module/layer/head that any run recorded (runs may differ in depth or heads).
AttentionStats union_of_heads(const std::vector<Run>& runs);
/// One head's statistics in a run, nullptr when the run did not record it.
const HeadStats* find_head(const Run& run, const std::string& module, int64_t layer, int64_t head);
/// Every /eval/<name> any run has, sorted.
std::vector<std::string> eval_names(const std::vector<Run>& runs);
/// true when any run has /samples (Run::samples_mean_bleu).
bool any_samples(const std::vector<Run>& runs);


}  // namespace attnlab::tools
