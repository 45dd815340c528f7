#pragma once
// Figures declared by what made the data. A trainer or a dataset that writes data of its own into
// a results file (predictions, a function's true curve, training points) declares how to draw it:
// a kind, the datasets of the file each layer draws from, axis labels. The declaration is stored
// in the file (/figures/<name>, docs/RESULTS.md), and `runner plot` and `runner report` draw every
// declared figure from it alone: a new plugin's figure needs no change to the tools.
//
//   results::Figure f;
//   f.name = "kernel_regression";
//   f.kind = results::FigureKind::curve;
//   f.xlabel = "x";
//   f.layers = {{.label = "Truth", .x = "predictions/x", .y = "predictions/truth"},
//               {.label = "Pred", .x = "predictions/x", .y = "predictions/test", .style = results::Style::dashed}};
//   results::declare_figure(res, f, "trainer 'nadaraya_watson'");
//
// Needs no LibTorch (the tools read it); the datasets a figure names are written as usual
// (results::write_tensor, Results::write_strings).
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::results {

enum class FigureKind {
  curve,      // y over x, one line (or set of points: a scatter) per layer, on shared axes
  sequences,  // small multiples: per row of [N, T, 2] datasets, a panel of point sequences in the plane
  heatmap,    // one [rows, columns] dataset as coloured cells, with optional row and column labels
  table,      // columns of 1-D datasets (numbers or strings), one row per element
};
const char* figure_kind_name(FigureKind kind);  // "curve", ...

enum class Style { line, dashed, points };  // how a layer's points are joined: a line, dashed, or not
enum class Marker { none, dot, cross };     // what marks each point

/// One layer of a figure: what it draws from and how. The fields a kind reads are named in its
/// comment; the others stay empty.
struct FigureLayer {
  std::string label = {};  // legend entry (curve, sequences); a table's column header
  /// curve: the x and y values, 1-D datasets of one length; x "" = 0, 1, 2, ...
  std::string x = {}, y = {};
  /// sequences: the points, [N, T, 2] (N sequences of T points (x, y)); heatmap: the cells,
  /// [rows, columns]; table: the column, a 1-D dataset of numbers or strings.
  std::string data = {};
  /// sequences: valid points per sequence, [N] ("" = all T).
  std::string lengths = {};
  /// sequences: the label of an earlier layer whose last point this layer's line starts from (a
  /// prediction continues its input).
  std::string continues = {};
  Style style = Style::line;
  Marker marker = Marker::none;
};

struct Figure {
  std::string name = {};  // /figures/<name>: letters, digits, '_' and '-'; `runner plot` writes <name>.png
  FigureKind kind = FigureKind::curve;
  std::string title = {};  // "" = the run's experiment name
  std::string xlabel = {}, ylabel = {};
  std::optional<std::pair<double, double>> xlim = {}, ylim = {};  // axis ranges ("" = from the data)
  std::vector<FigureLayer> layers = {};
  /// sequences: at most this many panels (the first sequences).
  int64_t panels = 10;
  /// sequences: one title per panel, from an [N] dataset of integer labels, each shown by its name
  /// in `label_names` (or as the number when it has none).
  std::string panel_labels = {};
  std::vector<std::string> label_names = {};
  /// sequences: a guide drawn behind every panel, a polyline of points (x, y) (the square the
  /// points lie on, say).
  std::vector<std::pair<double, double>> outline = {};
  /// heatmap: the rows' and columns' labels, 1-D string datasets ("" = positions).
  std::string row_labels = {}, column_labels = {};
  /// Who declared it ("trainer 'nadaraya_watson'"); set by declare_figure.
  std::string declared_by = {};
};

/// Stores `figure` as /figures/<name> (replacing a figure of that name, which then comes last in
/// the order of declaration), after checking it:
/// ResultsError naming the figure and the field for a bad name, no layers, a layer without the
/// datasets its kind needs, an empty or reversed axis range, or a `continues` that names no
/// earlier layer. The datasets named need not exist yet; the tools say which one is missing.
void declare_figure(Results& results, Figure figure, const std::string& declared_by);

/// The figures declared in the file, in the order they were declared. A file written before
/// figures were declared (attnlab 0.1 up to November 2026) gets the figures the tools then drew
/// from its layout: the curves of predictions/x, predictions/truth and predictions/test, and the
/// sequences of predictions/<test|val>/{source,target,prediction} in the plane.
std::vector<Figure> declared_figures(const ResultsReader& in);

}  // namespace attnlab::results
