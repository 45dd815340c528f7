#pragma once
// `runner plot --heads`: what runner ablate and runner prune stored, as figures. The head grid of
// an ablation (a row of panels per measured column, a column of panels per module; each panel
// layers x heads, the value printed in its cell) and a split's pruning curves (mean over the
// repeats with a min-max band, the full model's value dashed).
#include "tools/head_views.hpp"
#include "tools/plot/figures.hpp"

#include <string>
#include <vector>

namespace attnlab::tools::plot {

/// Deltas in a diverging map centred on 0 (red: removing the head hurts: loss up, BLEU down),
/// the other columns in "Reds" from 0; heads off in training grey with "off".
void ablation_figure(const HeadAblation& a, const std::string& title, const std::string& path, PixelSize size);

/// One split's curves (importance and random order together): BLEU, or the loss without BLEU,
/// against the percentage of heads removed.
void pruning_figure(const std::vector<const PruningCurve*>& curves, const std::string& title, const std::string& path,
                    PixelSize size);

}  // namespace attnlab::tools::plot
