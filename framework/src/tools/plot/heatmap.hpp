#pragma once
// d2l's show_heatmaps as a figure: a grid of attention matrices (rows = layers, columns = heads)
// sharing axes, token labels on the outer axes, and one colour bar ("Reds", 0 .. the largest
// finite weight). NaN and infinite cells are drawn grey with a hatch line and counted in a note
// under the figure (an all-NaN tensor still draws: every cell grey).
#include "tools/plot/canvas.hpp"

#include <attnlab/results/array.hpp>

#include <string>
#include <utility>
#include <vector>

namespace attnlab::tools::plot {

struct HeatmapGrid {
  results::FloatArray weights;                 // [rows, cols, queries, keys]
  std::vector<std::string> row_titles;         // one per row ("layer 1"), or empty
  std::vector<std::string> col_titles;         // one per column ("head 1"), or empty
  std::vector<std::string> query_labels;       // [queries] or empty (positions are used)
  std::vector<std::string> key_labels;         // [keys] or empty
  std::string title;
  std::string xlabel = "Key positions", ylabel = "Query positions";
};

/// The figure's natural size in user units (what the PNG gets without --width/--height).
std::pair<double, double> heatmap_size(const HeatmapGrid& grid);
/// Draws the grid filling a canvas made with heatmap_size().
void draw_heatmaps(const Canvas& canvas, const HeatmapGrid& grid);

}  // namespace attnlab::tools::plot
