#pragma once
// The tables `runner compare` (and `runner report`) show of what `runner ablate` and `runner
// prune` stored: a summary per ablation and pruning curve, and each run's most harmful heads.
#include "tools/group.hpp"
#include "tools/head_views.hpp"
#include "tools/runs.hpp"
#include "tools/table.hpp"

#include <string>
#include <vector>

namespace attnlab::tools {

/// Whether any run has an /ablation or /pruning group.
bool any_heads(const std::vector<Run>& runs);

/// One number per run for every ablation and pruning name any run has, section "ablation" or
/// "pruning", name the group's name, value: base_loss, max_delta_loss, base_bleu, min_delta_bleu,
/// heads_abs_delta_bleu_over_0.5 (ablation); base_loss, base_bleu, max_fraction_within_0.5_bleu (pruning).
/// Quantities no run has are left out. (group.cpp's quantities() adds these.)
std::vector<Quantity> head_quantities(const std::vector<Run>& runs);
/// "ablation/val/max_delta_loss": how compare's csv and summary table name a quantity.
std::string head_quantity_name(const Quantity& q);

/// quantity | A | B ...: head_quantities with the head that gives max_delta_loss and the split of
/// each group named in the cells.
Table heads_table(const std::vector<Run>& runs);
inline constexpr const char* kHeadsHeading =
    "Heads (runner ablate: each head off alone, delta = with it off - full model; runner prune: the largest "
    "fraction of heads removed with mean BLEU within 0.5 of the full model's)";

/// rank | module | layer | head | delta_loss | delta_bleu | importance_normalized (those stored):
/// the `k` rows with the largest delta_loss (all when k is 0), NaN (off in training) last.
Table top_heads_table(const HeadAblation& a, size_t k);
/// Above it: "Top 10 heads of A by delta loss: ablation 'val' (split val, checkpoint best; base loss ..., base BLEU ...)".
std::string top_heads_heading(const std::string& run, const HeadAblation& a, size_t k);

}  // namespace attnlab::tools
