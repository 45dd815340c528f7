#pragma once
// What `runner report` reads from a results file beyond what compare reads (tools/runs.hpp): the
// stored YAML, the recorded attention maps, the sample translations and the declared figures, and
// the rule that keeps the page's attention under a size budget.
#include <attnlab/results/results.hpp>

#include "tools/figure_data.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::tools::report {

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

/// One /rollout/<sample>/<result> (runner rollout --write): [queries, keys] quantised as attention.
struct RolloutMap {
  std::string name, method, module, definition;  // "encoder_self_rollout", "rollout", ...
  int64_t queries = 0, keys = 0;
  std::vector<std::string> query_tokens, key_tokens;
  std::vector<int32_t> weights;  // [queries, keys], row-major, 0..kWeightScale
};
struct RolloutSample {
  std::string text;
  std::vector<RolloutMap> results;
};

/// /interventions/head_mask/<module> (interventions.head_mask): the heads the run trained and
/// evaluated with switched off, [layer, head] from 0.
struct HeadsOff {
  std::string module;
  std::vector<std::pair<int64_t, int64_t>> off;
};

/// One /generations/<name> (runner generate, the lm trainer's samples): the prompt, what followed
/// it, and how it was decoded.
struct GenerationText {
  std::string name, prompt, continuation;
  std::string how;  // "greedy, 200 tokens, best checkpoint" / "sampled (temperature 0.8, top-k 40, seed 1), ..."
};

struct RunExtras {
  std::string config_yaml;  // /config as stored ("" when absent)
  std::string detail;       // the root attribute error, diverged or interrupted_during ("" when none)
  std::vector<AttentionSample> attention;
  int64_t maps_cut = 0;                  // maps with more than max_tokens real tokens on an axis (cut)
  std::vector<results::Sample> samples;  // /samples: source, reference, hypothesis, sentence BLEU
  std::vector<GenerationText> generations;  // /generations, in name order
  std::vector<FigureData> figures;          // the figures the run's plugins declared, read for the page
  std::vector<std::string> figure_problems;  // one line per declared figure that could not be read
  std::vector<RolloutSample> rollout;        // /rollout, each map cut to max_tokens per axis
  std::vector<HeadsOff> heads_off;           // modules with a head off in training (none: empty)
  std::string head_mask_text;                // /interventions/head_mask's text ("" when none)
};

/// How much of a declared figure the page holds: curves thinned to 2,000 points per layer, tables
/// cut to 100 rows, heatmaps of at most 40,000 cells (a larger one is a problem the page names).
inline constexpr FigureLimits kPageFigureLimits{.curve_points = 2000, .table_rows = 100, .heatmap_cells = 40000};

/// Reads a results file through ResultsReader (ReadCheck::none: call it inside read_isolated, as
/// load_run does). Attention maps go through make_map; no sample is dropped here. A declared
/// figure whose data cannot be read is left out with its problem in figure_problems.
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

}  // namespace attnlab::tools::report
