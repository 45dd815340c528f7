#pragma once
// What `runner report` reads from a results file beyond what compare reads (cli/runs.hpp): the
// stored YAML, the recorded attention maps, the sample translations and the predictions, and the
// rule that keeps the page's attention under a size budget.
#include <attnlab/results/results.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::cli::report {

/// One recorded module of one sample, trailing <pad> tokens cut, weights quantised to
/// 0..kWeightScale (weight * kWeightScale, rounded).
struct AttentionMap {
  std::string module;           // "encoder_self", "decoder_cross", ...
  std::vector<int64_t> layers;  // the layer of each row of weights (as stored)
  int64_t heads = 0, queries = 0, keys = 0;
  std::vector<std::string> query_tokens, key_tokens;  // one per query / key, or empty
  std::string query_side, key_side;
  std::vector<int32_t> weights;  // [layers, heads, queries, keys], row-major
  int64_t cells() const { return static_cast<int64_t>(weights.size()); }
};
inline constexpr int32_t kWeightScale = 1000;  // three decimals

struct AttentionSample {
  std::string text;  // the sample as given (its /attention/<sample> "text" attribute)
  std::vector<AttentionMap> maps;
};

/// Step-by-Step's corner sequences (predictions/test or predictions/val): the first kCorners.
struct CornerSequence {
  std::string direction;                                              // "Clockwise", ... ("" when not stored)
  std::vector<std::pair<double, double>> source, target, prediction;  // target/prediction cut to its length
};
inline constexpr int64_t kCorners = 10;

/// d2l's kernel regression: truth and prediction over x, and the training points.
struct KernelRegression {
  std::vector<double> x, truth, prediction, x_train, y_train;
};

struct RunExtras {
  std::string config_yaml;  // /config as stored ("" when absent)
  std::string detail;       // the root attribute error, diverged or interrupted_during ("" when none)
  std::vector<AttentionSample> attention;
  int64_t maps_cut = 0;                  // maps with more than max_tokens real tokens on an axis (cut)
  std::vector<results::Sample> samples;  // /samples: source, reference, hypothesis, sentence BLEU
  std::string corners_from;              // "predictions/test" (where the corners come from), "" when none
  std::vector<CornerSequence> corners;
  int64_t corners_total = 0;  // sequences stored (only the first kCorners are kept)
  std::optional<KernelRegression> kernel;
};

/// Reads a results file through ResultsReader (ReadCheck::none: call it inside read_isolated, as
/// load_run does). Attention maps go through make_map; no sample is dropped here.
RunExtras read_extras(const std::string& path, int64_t max_tokens);

/// A map from stored weights [layers, heads, Q, K] and labels: trailing "<pad>" tokens cut on
/// each axis, then at most `max_tokens` per axis, weights quantised.
AttentionMap make_map(const std::string& module, const results::Attention& att, int64_t max_tokens);

/// The page's attention budget (docs/REPORT.md).
struct AttentionLimits {
  int64_t max_tokens = 40;        // per axis of a map: the first tokens of a sentence are kept
  int64_t max_cells = 2'000'000;  // weights in the whole page (about 4 bytes each in the JSON)
};

/// Keeps whole samples, in recording order, while the page's weights (all runs together) stay
/// within limits.max_cells; the first sample is always kept. A sample is matched across runs by
/// its text. Returns "" when everything was kept, else the note the page shows ("kept 3 of 8
/// samples ...").
std::string subsample_attention(std::vector<RunExtras>& runs, const AttentionLimits& limits);

}  // namespace attnlab::cli::report
