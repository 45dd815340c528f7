#pragma once
// `runner plot` of a declared figure (attnlab/results/figure.hpp): one PNG or SVG drawn from the
// figure's kind and its data alone (tools/figure_data.hpp).
#include "tools/figure_data.hpp"
#include "tools/plot/figures.hpp"

#include <string>

namespace attnlab::tools::plot {

/// Draws `figure` into `path`: a curve figure as one panel, sequences as small multiples sharing
/// one legend, a heatmap as coloured cells with a colour bar, a table as a grid of text. A note
/// under the figure says what was left out.
void declared_figure(const FigureData& figure, const std::string& path, PixelSize size);

}  // namespace attnlab::tools::plot
