#pragma once
// What `runner ablate` and `runner prune` store (/ablation/<name>, /pruning/<name>; docs/RESULTS.md),
// read back for compare, plot and report, and the summaries those show: the heads that matter
// most when removed alone, and how far the pruning curve goes before BLEU drops.
#include <attnlab/results/reader.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::tools {

/// The measured columns of /ablation/<name>, in the order the tools show them.
inline constexpr const char* kAblationColumns[] = {"delta_loss", "delta_bleu", "importance_normalized", "loss",
                                                  "bleu",       "importance"};

/// One /ablation/<name>: a row per module x layer x head (layer and head from 1).
struct HeadAblation {
  std::string name, split, checkpoint, method, trained_head_mask;
  std::optional<double> base_loss, base_bleu;
  std::vector<std::string> module;
  std::vector<int64_t> layer, head;
  /// "delta_loss", "delta_bleu", ... -> one value per row (NaN: the head was off in training);
  /// only the columns the file holds.
  std::map<std::string, std::vector<double>> values;
  size_t rows() const { return module.size(); }
  const std::vector<double>* column(const std::string& c) const;
  /// Modules in the order of their first row.
  std::vector<std::string> modules() const;
};

/// One /pruning/<name>: the metric after removing heads_off[p] heads, per repeat (order).
struct PruningCurve {
  std::string name, split, order;  // order: "importance" or "random"
  bool reestimate = false;
  int64_t repeats = 1, heads_total = 0;
  std::optional<double> base_loss, base_bleu;
  std::vector<int64_t> heads_off;
  std::vector<double> fraction;
  std::vector<std::vector<double>> loss, bleu;  // [repeats][points]; bleu empty without BLEU
  /// "bleu" when the file has BLEU, else "loss".
  std::string metric() const { return bleu.empty() ? "loss" : "bleu"; }
  const std::vector<std::vector<double>>& values() const { return bleu.empty() ? loss : bleu; }
};

/// The kinds of head score, in the order the tools show them (train/head_scores.hpp).
inline constexpr const char* kHeadScoreKinds[] = {"previous_token", "duplicate_token", "induction",
                                                  "first_token_mass", "val_first_token_mass"};

/// One /head_scores/<name> (runner heads) or /head_scores/training/step_<s> (the lm trainer's
/// head_scores_every): every head's scores, [layers, heads] row-major per kind.
struct HeadScoreGrid {
  std::string name;             // the group's name; "training" for the trainer's
  std::optional<int64_t> step;  // training: the optimizer steps before the measurement
  std::string module, checkpoint, token_range;
  int64_t sequences = 0, length = 0, layers = 0, heads = 0;
  /// kind -> layers * heads values, layer-major (NaN: off in training); the kinds the file holds.
  std::map<std::string, std::vector<double>> scores;
};

/// Every /head_scores/<name>, sorted by name, the trainer's /head_scores/training/step_<s> among
/// them in step order. A group whose scores are not [layers, heads] alike is an Error naming it.
std::vector<HeadScoreGrid> read_head_scores(const results::ResultsReader& in);

/// Per point over the repeats: mean, min and max of the finite values (NaN where none).
struct CurveBand {
  std::vector<double> mean, lo, hi;
};
CurveBand curve_band(const std::vector<std::vector<double>>& repeats);

/// Every /ablation/<name> and /pruning/<name> of a file, sorted by name. A group that is not laid
/// out as docs/RESULTS.md says is an Error naming it and what is wrong.
std::vector<HeadAblation> read_ablations(const results::ResultsReader& in);
std::vector<PruningCurve> read_pruning(const results::ResultsReader& in);

/// The row with the largest finite delta_loss (nullopt without delta_loss or a finite one).
std::optional<size_t> most_harmful(const HeadAblation& a);
/// Rows sorted by delta_loss (without it: importance_normalized), largest first, NaN rows (off in
/// training) last; at most k (0: all). Empty when the ablation has neither column.
std::vector<size_t> top_heads(const HeadAblation& a, size_t k);
/// Heads whose delta_bleu is below -threshold (removing them costs BLEU) and above +threshold.
struct BleuMoves {
  int64_t lower = 0, raise = 0;
};
std::optional<BleuMoves> bleu_moves(const HeadAblation& a, double threshold = 0.5);
/// The largest fraction of heads removed while the mean BLEU over the repeats stays within
/// `tolerance` of the full model's (base_bleu), every point before it included (the curve is
/// followed from 0 and stops at its first drop below); nullopt without BLEU.
std::optional<double> fraction_within(const PruningCurve& c, double tolerance = 0.5);

/// "encoder_self layer 2 head 3"
std::string head_name(const HeadAblation& a, size_t row);

}  // namespace attnlab::tools
