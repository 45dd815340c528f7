// Declared figures drawn with cairo, by kind: curve (one panel of axes), sequences (a panel per
// sequence), heatmap (d2l's show_heatmaps for one matrix), table (a grid of text).
#include "tools/plot/declared.hpp"

#include "tools/plot/axes.hpp"
#include "tools/plot/canvas.hpp"
#include "tools/plot/heatmap.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace attnlab::tools::plot {
namespace {

using results::FigureKind;

constexpr double kMargin = 10, kPanelW = 430, kPanelH = 300;
const TextStyle kNote{10, false, kGrey};

/// The colour of layer i: the first layer of sequences black (what the model was given), then the
/// tab10 cycle; a curve's layers the cycle from its start.
Color layer_color(FigureKind kind, size_t i) {
  static const int kSequenceCycle[] = {0, 3, 2, 1, 4};  // blue, red, green, orange, purple
  if (kind == FigureKind::sequences) return i == 0 ? kBlack : palette(kSequenceCycle[(i - 1) % 5]);
  return palette(static_cast<int>(i));
}

Marker marker_of(results::Marker m) {
  return m == results::Marker::dot ? Marker::Dot : m == results::Marker::cross ? Marker::Cross : Marker::None;
}

/// A layer as a legend entry or a curve series (no data).
Series style_of(const FigureData& d, size_t i) {
  const auto& spec = d.layers[i].spec;
  Series s{spec.label, {}, {}, layer_color(d.spec.kind, i)};
  s.line = spec.style != results::Style::points;
  s.dashed = spec.style == results::Style::dashed;
  s.marker = marker_of(spec.marker);
  if (!s.line && s.marker == Marker::None) s.marker = Marker::Dot;  // points need a mark
  if (!s.line) s.color = s.color.with_alpha(0.5);                   // a cloud of points behind the lines
  s.marker_size = 3.5;
  return s;
}

void curve_figure(const FigureData& d, const std::string& path, PixelSize size) {
  Axes a;
  a.title = d.spec.title;
  a.xlabel = d.spec.xlabel;
  a.ylabel = d.spec.ylabel;
  a.xlim = d.spec.xlim;
  a.ylim = d.spec.ylim;
  for (size_t i = 0; i < d.layers.size(); ++i) {
    Series s = style_of(d, i);
    s.x = d.layers[i].x;
    s.y = d.layers[i].y;
    a.series.push_back(std::move(s));
  }
  Canvas c(path, kPanelW + 2 * kMargin, kPanelH + 2 * kMargin, size.width, size.height);
  draw_axes(c, a, kMargin, kMargin, kPanelW, kPanelH);
  c.finish();
}

/// The range every panel of a sequences figure shares: the declared one, else the data's and
/// the outline's, padded by a tenth.
std::pair<std::pair<double, double>, std::pair<double, double>> plane_limits(const FigureData& d) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  const auto add = [&](double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  };
  for (const auto& l : d.layers) {
    for (const auto& seq : l.sequences) {
      for (const auto& [x, y] : seq) add(x, y);
    }
  }
  for (const auto& [x, y] : d.spec.outline) add(x, y);
  if (!(x0 <= x1)) x0 = y0 = -1, x1 = y1 = 1;  // nothing finite
  const double pad = 0.1 * std::max({x1 - x0, y1 - y0, 1e-6});
  return {d.spec.xlim.value_or(std::pair{x0 - pad, x1 + pad}), d.spec.ylim.value_or(std::pair{y0 - pad, y1 + pad})};
}

void sequences_figure(const FigureData& d, const std::string& path, PixelSize size) {
  const int n = static_cast<int>(d.shown);
  ATTNLAB_CHECK(n > 0, Error, "plot {}: figure '{}' has no sequences to draw", path, d.spec.name);
  const int cols = std::min(n, 5), rows = (n + cols - 1) / cols;
  const double cell = 210, title_h = 22, legend_h = 30, note_h = d.note.empty() ? 0 : 18;
  const TextStyle title{12, true};
  Canvas c(path, cols * cell + 2 * kMargin, rows * (cell + title_h) + legend_h + note_h + 2 * kMargin, size.width,
           size.height);
  const auto [xr, yr] = plane_limits(d);
  for (int i = 0; i < n; ++i) {
    const double ox = kMargin + (i % cols) * cell, oy = kMargin + (i / cols) * (cell + title_h);
    const double box = cell - 24, bx = ox + 12, by = oy + title_h;
    auto px = [&, xr = xr](double v) { return bx + (v - xr.first) / (xr.second - xr.first) * box; };
    auto py = [&, yr = yr](double v) { return by + (yr.second - v) / (yr.second - yr.first) * box; };
    c.text(d.panel_titles[static_cast<size_t>(i)], ox + cell / 2, oy + title_h - 4, title, HAlign::Center,
           VAlign::Bottom);
    c.frame(bx, by, box, box, kLightGrey, 0.8);
    const auto& outline = d.spec.outline;
    for (size_t k = 0; k + 1 < outline.size(); ++k) {
      c.line(px(outline[k].first), py(outline[k].second), px(outline[k + 1].first), py(outline[k + 1].second), kGrey,
             0.8, true);
    }
    for (size_t k = 0; k < d.layers.size(); ++k) {  // lines first, then every layer's marks on top
      const Series s = style_of(d, k);
      const auto& seq = d.layers[k].sequences[static_cast<size_t>(i)];
      for (size_t t = 0; s.line && t + 1 < seq.size(); ++t) {
        c.line(px(seq[t].first), py(seq[t].second), px(seq[t + 1].first), py(seq[t + 1].second), s.color, 2.0,
               s.dashed);
      }
    }
    for (size_t k = 0; k < d.layers.size(); ++k) {
      const Series s = style_of(d, k);
      const auto& seq = d.layers[k].sequences[static_cast<size_t>(i)];
      // A continued layer's first point is its source's last: marked there already.
      const size_t first = d.layers[k].spec.continues.empty() ? 0 : 1;
      for (size_t t = first; t < seq.size(); ++t) {
        if (s.marker == Marker::Cross) c.cross(px(seq[t].first), py(seq[t].second), 4.5, s.color, 2);
        if (s.marker == Marker::Dot) c.circle(px(seq[t].first), py(seq[t].second), 4, s.color);
      }
    }
  }
  // One legend for the figure, centred under the panels.
  const double entry_w = 120, lw = entry_w * static_cast<double>(d.layers.size());
  double lx = kMargin + (cols * cell - lw) / 2;
  const double ly = kMargin + rows * (cell + title_h) + legend_h / 2;
  for (size_t k = 0; k < d.layers.size(); ++k) {
    const Series e = style_of(d, k);
    if (e.line) c.line(lx, ly, lx + 26, ly, e.color, 2.0, e.dashed);
    if (e.marker == Marker::Dot) c.circle(lx + 13, ly, 4, e.color);
    if (e.marker == Marker::Cross) c.cross(lx + 13, ly, 4, e.color, 2);
    c.text(e.label, lx + 32, ly, TextStyle{11}, HAlign::Left, VAlign::Middle);
    lx += entry_w;
  }
  if (!d.note.empty()) c.text(d.note, kMargin, ly + legend_h / 2 + 4, kNote, HAlign::Left, VAlign::Top);
  c.finish();
}

void heatmap_figure(const FigureData& d, const std::string& path, PixelSize size) {
  const auto& cells = d.layers.front().cells;  // [rows, columns]
  HeatmapGrid g;
  g.weights.shape = {1, 1, cells.size(0), cells.size(1)};
  g.weights.values = cells.values;
  g.query_labels = d.row_labels;
  g.key_labels = d.column_labels;
  g.title = d.spec.title;
  g.xlabel = d.spec.xlabel;
  g.ylabel = d.spec.ylabel;
  auto [w, h] = heatmap_size(g);
  Canvas c(path, w, h, size.width, size.height);
  draw_heatmaps(c, g);
  c.finish();
}

void table_figure(const FigureData& d, const std::string& path, PixelSize size) {
  const TextStyle head{11, true}, body{11}, title{13, true};
  const double pad = 6, row_h = measure_text("Ag", body).h + 2 * pad;
  std::vector<double> widths;
  for (const auto& l : d.layers) {
    double w = measure_text(l.spec.label, head).w;
    for (const auto& v : l.column) w = std::max(w, measure_text(v, body).w);
    widths.push_back(std::min(w, 320.0) + 2 * pad);
  }
  double table_w = 0;
  for (double w : widths) table_w += w;
  const double title_h = measure_text("Ag", title).h + 10, note_h = d.note.empty() ? 0 : 18;
  const double width = std::max(table_w, measure_text(d.spec.title, title).w) + 2 * kMargin;
  const double height = kMargin * 2 + title_h + row_h * static_cast<double>(d.shown + 1) + note_h;
  Canvas c(path, width, height, size.width, size.height);
  c.text(d.spec.title, kMargin, kMargin, title, HAlign::Left, VAlign::Top);
  const double top = kMargin + title_h;
  c.rect(kMargin, top, table_w, row_h, kLightGrey);
  double x = kMargin;
  for (size_t k = 0; k < d.layers.size(); ++k) {
    const auto& column = d.layers[k].column;
    // Numbers right-aligned (their digits line up), text left-aligned.
    const bool numeric = std::all_of(column.begin(), column.end(), [](const std::string& v) {
      char* end = nullptr;
      return v.empty() || (std::strtod(v.c_str(), &end), end != v.c_str() && *end == '\0');
    });
    c.text(d.layers[k].spec.label, numeric ? x + widths[k] - pad : x + pad, top + row_h / 2, head,
           numeric ? HAlign::Right : HAlign::Left, VAlign::Middle);
    for (int64_t r = 0; r < d.shown; ++r) {
      c.text(column[static_cast<size_t>(r)], numeric ? x + widths[k] - pad : x + pad, top + row_h * (r + 1.5), body,
             numeric ? HAlign::Right : HAlign::Left, VAlign::Middle);
    }
    x += widths[k];
  }
  for (int64_t r = 0; r <= d.shown + 1; ++r) {
    c.line(kMargin, top + row_h * r, kMargin + table_w, top + row_h * r, kLightGrey, 0.8);
  }
  if (!d.note.empty()) c.text(d.note, kMargin, top + row_h * (d.shown + 1) + 4, kNote, HAlign::Left, VAlign::Top);
  c.finish();
}

}  // namespace

void declared_figure(const FigureData& figure, const std::string& path, PixelSize size) {
  switch (figure.spec.kind) {
    case FigureKind::curve:
      return curve_figure(figure, path, size);
    case FigureKind::sequences:
      return sequences_figure(figure, path, size);
    case FigureKind::heatmap:
      return heatmap_figure(figure, path, size);
    case FigureKind::table:
      return table_figure(figure, path, size);
  }
}

}  // namespace attnlab::tools::plot
