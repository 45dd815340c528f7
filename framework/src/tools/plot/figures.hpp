#pragma once
// The figures `runner plot` and `runner compare --plot` draw, each into one PNG or SVG file.
#include "tools/group.hpp"
#include "tools/runs.hpp"

#include <attnlab/results/reader.hpp>

#include <string>
#include <vector>

namespace attnlab::tools::plot {

/// Output size in pixels; 0 = the figure's natural size.
struct PixelSize {
  int width = 0, height = 0;
};

/// compare --plot: one panel per metric, one curve per run, legend from the differing keys.
void compare_figure(const std::vector<Run>& runs, const std::vector<std::string>& metrics,
                    const std::vector<std::string>& differing, const std::string& path, PixelSize size, bool log_losses);

/// compare --group-by --plot: one panel per metric, per group the mean curve over its runs with a
/// band of ±1 sample sd (where at least two runs have the epoch), legend from the group labels.
void group_figure(const std::vector<Group>& groups, const std::vector<std::string>& metrics, const std::string& path,
                  PixelSize size, bool log_losses);

/// Loss curves (and every other metric series) of one run; train and val of one name share a
/// panel, "<name>_train_mode"/"<name>_eval_mode" share one too. False when the run has no series.
bool losses_figure(const results::ResultsReader& in, const std::string& path, PixelSize size, bool log_losses);

/// d2l show_heatmaps for one recorded module of one sample: rows = layers, columns = heads.
void attention_figure(const results::ResultsReader& in, const std::string& sample, const std::string& module,
                      const std::string& path, PixelSize size);

}  // namespace attnlab::tools::plot
