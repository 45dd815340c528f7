#pragma once
// A declared figure (attnlab/results/figure.hpp) with the data it draws read from the results
// file and checked: what `runner plot` draws with cairo (plot/declared.cpp) and `runner report`
// hands its page (report/model.cpp). Neither tool knows what made the data.
#include <attnlab/results/array.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/reader.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::tools {

using Points = std::vector<std::pair<double, double>>;

struct LayerData {
  results::FigureLayer spec;
  std::vector<double> x, y;         // curve: the values (x = 0, 1, ... when the layer names none)
  std::vector<Points> sequences;    // sequences: one per panel, cut to its length, a continued
                                    // layer's line starting at its source layer's last point
  results::FloatArray cells;        // heatmap: [rows, columns]
  std::vector<std::string> column;  // table: the column's values as text
};

struct FigureData {
  results::Figure spec;  // its title filled in (the experiment's name when it declared none)
  std::vector<LayerData> layers;
  std::vector<std::string> panel_titles;               // sequences: "#0 Clockwise", ...
  std::vector<std::string> row_labels, column_labels;  // heatmap
  int64_t total = 0;  // sequences: sequences stored; table: rows stored; curve: largest layer
  int64_t shown = 0;  // of those, how many are in the data (the rest were left out: `note` says so)
  std::string note;   // "" or what was left out
};

/// How much of a figure's data a reader keeps (the report's page has a size budget).
struct FigureLimits {
  int64_t curve_points = 0;  // per curve layer, evenly thinned (first and last kept); 0 = all
  int64_t table_rows = 100;
  int64_t heatmap_cells = 0;  // rows x columns; 0 = all (else an Error: a heatmap is not thinned)
};

/// Reads the data of `figure` from `in`. Error naming the figure, who declared it and the dataset
/// when a dataset it names is missing or of a shape its kind cannot draw.
FigureData read_figure_data(const results::ResultsReader& in, const results::Figure& figure,
                            const FigureLimits& limits = {});

/// A number as a table cell: integers without decimals, others with up to 6 significant digits.
std::string cell_text(double v);

}  // namespace attnlab::tools
