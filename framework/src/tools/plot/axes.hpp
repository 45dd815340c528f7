#pragma once
// One panel of line/scatter plots with ticks, grid, labels and a legend (matplotlib-like).
#include "tools/plot/canvas.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::tools::plot {

enum class Marker { None, Dot, Cross };

struct Series {
  std::string label;  // "" = not in the legend
  std::vector<double> x, y;
  Color color = kBlack;
  bool line = true;
  bool dashed = false;
  double width = 1.8;
  Marker marker = Marker::None;
  double marker_size = 3.0;
  std::vector<double> lo = {}, hi = {};  // a band filled between lo and hi at the same x, under the line (empty: none)
};

struct Axes {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool logy = false;  // non-positive values are left out
  std::optional<std::pair<double, double>> xlim, ylim;
  bool legend = true;
  bool grid = true;
  bool integer_x = false;  // x ticks at whole numbers only (epochs)
};

/// Draws the panel inside the box (x, y, w, h): title, tick labels and axis labels included.
void draw_axes(const Canvas& canvas, const Axes& axes, double x, double y, double w, double h);

/// Tick values at 1, 2, 5 x 10^k steps covering [lo, hi] with about `target` ticks.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
/// A tick label with as many decimals as the step needs ("0.25", "1e-04" for tiny logs).
std::string tick_label(double value, double step);
/// Ticks of a log axis from 10^y0 to 10^y1, as exponents, with their labels: decades; within two
/// decades 1-2-5 steps; within one decade (where those may all fall outside) even steps of the
/// values. At least two ticks whenever y1 > y0.
std::pair<std::vector<double>, std::vector<std::string>> log_ticks(double y0, double y1);

/// Draws a legend box with the given entries in the top right of a region, at (right, top).
void draw_legend(const Canvas& canvas, const std::vector<Series>& entries, double right, double top);

}  // namespace attnlab::tools::plot
