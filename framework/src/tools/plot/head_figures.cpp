#include "tools/plot/head_figures.hpp"

#include "tools/plot/axes.hpp"
#include "tools/plot/canvas.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace attnlab::tools::plot {
namespace {

constexpr double kMargin = 12, kGap = 26, kBarW = 12;
constexpr Color kOff{0.80, 0.80, 0.85, 1};  // as heatmap.cpp's "no value"
const TextStyle kTick{10}, kHead{11, true}, kTitle{13, true};

/// ColorBrewer RdBu at t in [-1, 1]: blue below 0, white at 0, red above.
Color diverging(double t) {
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, -1.0, 1.0);
  const Color red{0.70, 0.09, 0.17, 1}, blue{0.13, 0.40, 0.67, 1};
  const Color& end = t >= 0 ? red : blue;
  const double f = std::abs(t);
  return {1 + (end.r - 1) * f, 1 + (end.g - 1) * f, 1 + (end.b - 1) * f, 1};
}

const char* column_title(const std::string& c) {
  return c == "delta_loss"              ? "\u0394 loss (head off - full model)"
         : c == "delta_bleu"            ? "\u0394 BLEU (head off - full model)"
         : c == "importance_normalized" ? "importance (normalised per layer)"
                                        : c.c_str();
}

struct Grid {
  std::vector<int64_t> layers, heads;
};
Grid grid_of(const HeadAblation& a, const std::string& module) {
  std::set<int64_t> l, h;
  for (size_t r = 0; r < a.rows(); ++r) {
    if (a.module[r] != module) continue;
    l.insert(a.layer[r]);
    h.insert(a.head[r]);
  }
  return {{l.begin(), l.end()}, {h.begin(), h.end()}};
}

}  // namespace

void ablation_figure(const HeadAblation& a, const std::string& title, const std::string& path, PixelSize size) {
  std::vector<std::string> columns;
  for (const char* c : {"delta_loss", "delta_bleu", "importance_normalized"}) {
    if (a.column(c)) columns.push_back(c);
  }
  ATTNLAB_CHECK(!columns.empty(), Error, "plot: ablation '{}' holds none of delta_loss, delta_bleu, importance", a.name);
  const auto modules = a.modules();
  std::vector<Grid> grids;
  size_t most = 1;
  for (const auto& m : modules) {
    grids.push_back(grid_of(a, m));
    most = std::max({most, grids.back().layers.size(), grids.back().heads.size()});
  }
  const double cell = std::clamp(std::round(200.0 / static_cast<double>(most)), 12.0, 44.0);
  const double label_w = measure_text("layer 12", kTick).w + 6, head_h = measure_text("Ag", kHead).h + 4;
  const double row_title_h = measure_text("Ag", kHead).h + 6, bar_w = kBarW + measure_text("+0.000", kTick).w + 8;
  double panel_w = 0, panel_h = 0;
  for (const auto& g : grids) {
    panel_w = std::max(panel_w, cell * static_cast<double>(g.heads.size()));
    panel_h = std::max(panel_h, cell * static_cast<double>(g.layers.size()));
  }
  const double block_w = label_w + panel_w + kGap, block_h = row_title_h + head_h + panel_h + kGap;
  const double title_h = measure_text("Ag", kTitle).h + 10, note_h = measure_text("Ag", kTick).h + 6;
  const double width = std::max(2 * kMargin + block_w * static_cast<double>(modules.size()) + bar_w,
                                measure_text(title, kTitle).w + 2 * kMargin);
  const double height = 2 * kMargin + title_h + block_h * static_cast<double>(columns.size()) + note_h;
  Canvas c(path, width, height, size.width, size.height);
  c.text(title, width / 2, kMargin, kTitle, HAlign::Center, VAlign::Top);
  bool any_off = false;
  for (size_t ci = 0; ci < columns.size(); ++ci) {
    const auto& v = *a.column(columns[ci]);
    const bool delta = columns[ci].starts_with("delta_");
    const double sign = columns[ci] == "delta_bleu" ? -1 : 1;  // red: the removal hurts
    double top = 0;
    for (double x : v) top = std::isfinite(x) ? std::max(top, std::abs(x)) : top;
    top = top > 0 ? top : 1;
    const double y0 = kMargin + title_h + static_cast<double>(ci) * block_h;
    c.text(column_title(columns[ci]), kMargin, y0, kHead, HAlign::Left, VAlign::Top);
    for (size_t mi = 0; mi < modules.size(); ++mi) {
      const auto& g = grids[mi];
      const double x0 = kMargin + static_cast<double>(mi) * block_w + label_w, gy = y0 + row_title_h + head_h;
      c.text(modules[mi], x0 + cell * static_cast<double>(g.heads.size()) / 2, y0 + row_title_h, kHead, HAlign::Center,
             VAlign::Top);
      for (size_t li = 0; li < g.layers.size(); ++li) {
        c.text(fmt::format("layer {}", g.layers[li]), x0 - 4, gy + (static_cast<double>(li) + 0.5) * cell, kTick,
               HAlign::Right, VAlign::Middle);
      }
      for (size_t hi = 0; hi < g.heads.size(); ++hi) {
        c.text(fmt::format("{}", g.heads[hi]), x0 + (static_cast<double>(hi) + 0.5) * cell,
               gy + cell * static_cast<double>(g.layers.size()) + 2, kTick, HAlign::Center, VAlign::Top);
      }
      for (size_t r = 0; r < a.rows(); ++r) {
        if (a.module[r] != modules[mi]) continue;
        const auto li = std::find(g.layers.begin(), g.layers.end(), a.layer[r]) - g.layers.begin();
        const auto hi = std::find(g.heads.begin(), g.heads.end(), a.head[r]) - g.heads.begin();
        const double x = x0 + static_cast<double>(hi) * cell, y = gy + static_cast<double>(li) * cell;
        const double t = std::isfinite(v[r]) ? sign * v[r] / top : 0;
        const Color fill = !std::isfinite(v[r]) ? kOff : delta ? diverging(t) : reds(v[r] / top);
        c.rect(x, y, cell, cell, fill);
        c.frame(x, y, cell, cell, kWhite, 0.6);
        any_off = any_off || !std::isfinite(v[r]);
        if (cell >= 26) {
          const std::string text = !std::isfinite(v[r]) ? "off"
                                   : delta             ? fmt::format("{:+.{}f}", v[r], columns[ci] == "delta_bleu" ? 2 : 3)
                                                       : fmt::format("{:.3f}", v[r]);
          const TextStyle ts{std::min(10.0, cell / 4.2), false, std::abs(t) > 0.6 || (!delta && t > 0.6) ? kWhite : kBlack};
          c.text(text, x + cell / 2, y + cell / 2, ts, HAlign::Center, VAlign::Middle);
        }
      }
    }
    // The colour bar of this row: -top .. top for the deltas, 0 .. top otherwise.
    const double bx = width - kMargin - bar_w, by = y0 + row_title_h + head_h, bh = std::max(panel_h, 40.0);
    const int steps = 48;
    for (int i = 0; i < steps; ++i) {
      const double f = (i + 0.5) / steps;  // 0 at the bottom
      const Color col = delta ? diverging(sign * (2 * f - 1)) : reds(f);
      c.rect(bx, by + bh * (1 - static_cast<double>(i + 1) / steps), kBarW, bh / steps + 0.5, col);
    }
    c.frame(bx, by, kBarW, bh, kBlack, 0.6);
    c.text(fmt::format("{:+.3g}", top).substr(delta ? 0 : 1), bx + kBarW + 3, by, kTick, HAlign::Left, VAlign::Top);
    c.text(delta ? fmt::format("{:+.3g}", -top) : "0", bx + kBarW + 3, by + bh, kTick, HAlign::Left, VAlign::Bottom);
  }
  if (any_off) {
    const double y = height - kMargin - note_h + 3;
    c.rect(kMargin, y, 10, 10, kOff);
    c.text("grey: the head was off in training (no measurement)", kMargin + 14, y + 5, kTick, HAlign::Left,
           VAlign::Middle);
  }
  c.finish();
}

void pruning_figure(const std::vector<const PruningCurve*>& curves, const std::string& title, const std::string& path,
                    PixelSize size) {
  ATTNLAB_CHECK(!curves.empty(), Error, "plot {}: no pruning curve", path);
  const bool bleu = !curves.front()->bleu.empty();
  Axes ax;
  ax.title = title;
  ax.xlabel = "heads removed (%)";
  ax.ylabel = bleu ? "BLEU" : "loss";
  double lo = 0, hi = 100;
  ax.xlim = std::pair{lo, hi};
  int colour = 0;
  std::optional<double> base;
  for (const auto* c : curves) {
    const auto& values = bleu ? c->bleu : c->loss;
    if (values.empty()) continue;  // a curve without BLEU beside ones with it
    const auto band = curve_band(values);
    Series s;
    s.label = c->order + (c->reestimate ? " (re-estimated)" : "") +
              (c->repeats > 1 ? fmt::format(", {} repeats: mean, min-max", c->repeats) : std::string());
    s.color = palette(colour++);
    s.marker = Marker::Dot;
    for (size_t p = 0; p < c->fraction.size() && p < band.mean.size(); ++p) {
      if (!std::isfinite(band.mean[p])) continue;
      s.x.push_back(100 * c->fraction[p]);
      s.y.push_back(band.mean[p]);
      if (c->repeats > 1) {
        s.lo.push_back(band.lo[p]);
        s.hi.push_back(band.hi[p]);
      }
    }
    ax.series.push_back(std::move(s));
    if (!base) base = bleu ? c->base_bleu : c->base_loss;
  }
  if (base) {
    Series b{"full model", {lo, hi}, {*base, *base}, kGrey};
    b.dashed = true;
    b.width = 1.2;
    ax.series.push_back(std::move(b));
  }
  constexpr double kW = 520, kH = 340;
  Canvas canvas(path, kW + 2 * kMargin, kH + 2 * kMargin, size.width, size.height);
  draw_axes(canvas, ax, kMargin, kMargin, kW, kH);
  canvas.finish();
}

}  // namespace attnlab::tools::plot
