#include "tools/plot/heatmap.hpp"

#include "tools/plot/axes.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnlab::tools::plot {
namespace {

constexpr double kMargin = 12, kGap = 14, kTickLen = 3, kBarW = 14;
const TextStyle kTick{10}, kLabel{12}, kTitle{13, true}, kHead{11, true};

/// Everything the layout needs, computed once from the grid.
struct Layout {
  int64_t rows = 0, cols = 0, q = 0, k = 0;
  double cell = 0;                  // one matrix entry, square
  int64_t q_every = 1, k_every = 1;  // label thinning
  bool rotate_keys = false;
  std::vector<std::string> qlabels, klabels;
  double title_h = 0, head_h = 0, row_w = 0, ylabel_w = 0, qlabel_w = 0, klabel_h = 0, xlabel_h = 0, bar_w = 0;
  double grid_x = 0, grid_y = 0, mat_w = 0, mat_h = 0, width = 0, height = 0;
  float vmax = 1;       // the colour scale's top: the largest finite weight
  int64_t missing = 0;  // cells holding NaN or +-Inf, drawn as "no value"
  bool any_finite = true;
  std::string note;  // the line under the figure explaining the "no value" cells, or ""
  double note_h = 0;
};

/// A cool grey for a cell with no value (NaN or +-Inf): off the red colour scale, and not a
/// shade of the black-on-white text either.
constexpr Color kNoValue{0.80, 0.80, 0.85, 1};

std::vector<std::string> labels_or_positions(const std::vector<std::string>& given, int64_t n) {
  if (static_cast<int64_t>(given.size()) == n) return given;
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

Layout layout(const HeatmapGrid& g) {
  ATTNLAB_CHECK(g.weights.dim() == 4, Error, "heatmaps: expected weights [rows, cols, queries, keys], found [{}]",
                fmt::join(g.weights.shape, ", "));
  Layout L;
  L.rows = g.weights.size(0);
  L.cols = g.weights.size(1);
  L.q = g.weights.size(2);
  L.k = g.weights.size(3);
  L.cell = std::clamp(std::round(260.0 / std::max<int64_t>({L.q, L.k, 1})), 5.0, 48.0);
  L.qlabels = labels_or_positions(g.query_labels, L.q);
  L.klabels = labels_or_positions(g.key_labels, L.k);
  const double fh = measure_text("Ag", kTick).h;
  L.q_every = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((fh + 1) / L.cell)));
  double kmax = 0;
  for (const auto& s : L.qlabels) L.qlabel_w = std::max(L.qlabel_w, measure_text(s, kTick).w);
  for (const auto& s : L.klabels) kmax = std::max(kmax, measure_text(s, kTick).w);
  L.rotate_keys = kmax > L.cell * 0.95;
  L.k_every = L.rotate_keys ? L.q_every : std::max<int64_t>(1, static_cast<int64_t>(std::ceil((kmax + 4) / L.cell)));
  L.klabel_h = (L.rotate_keys ? kmax : fh) + kTickLen + 3;
  const double lh = measure_text("Ag", kLabel).h;
  L.title_h = g.title.empty() ? 0 : measure_text("Ag", kTitle).h + 8;
  L.head_h = g.col_titles.empty() ? 0 : measure_text("Ag", kHead).h + 6;
  L.row_w = g.row_titles.empty() ? 0 : measure_text("Ag", kHead).h + 6;
  L.ylabel_w = g.ylabel.empty() ? 0 : lh + 6;
  L.xlabel_h = g.xlabel.empty() ? 0 : lh + 6;
  L.mat_w = L.cell * static_cast<double>(L.k);
  L.mat_h = L.cell * static_cast<double>(L.q);
  const double bar_label_w = measure_text("0.000", kTick).w;  // the widest colour-bar label
  L.bar_w = kGap * 1.5 + kBarW + kTickLen + 3 + bar_label_w;
  double title_w = measure_text(g.title, kTitle).w;
  L.grid_x = kMargin + L.ylabel_w + L.row_w + L.qlabel_w + kTickLen + 3;
  L.grid_y = kMargin + L.title_h + L.head_h;
  const double grid_w = L.cols * L.mat_w + (L.cols - 1) * kGap, grid_h = L.rows * L.mat_h + (L.rows - 1) * kGap;
  L.width = std::max(L.grid_x + grid_w + L.bar_w + kMargin, title_w + 2 * kMargin);
  L.height = L.grid_y + grid_h + L.klabel_h + L.xlabel_h + kMargin;
  // The colour scale comes from the finite weights: NaN (an all-NaN tensor made cairo fail with
  // "invalid matrix") and +-Inf cells are drawn grey and explained under the figure.
  float largest = -std::numeric_limits<float>::infinity();
  for (float v : g.weights.values) {
    if (std::isfinite(v)) {
      largest = std::max(largest, v);
    } else {
      ++L.missing;
    }
  }
  L.any_finite = L.missing < g.weights.numel();
  if (L.any_finite) L.vmax = std::max(largest, 1e-6f);
  if (L.missing > 0) {
    L.note = L.any_finite ? fmt::format(
                                "grey: no value (NaN or infinite) in {} of {} cells; colours from the finite "
                                "weights",
                                L.missing, g.weights.numel())
                          : fmt::format("no finite weight: all {} cells are NaN or infinite (grey)", L.missing);
    const auto m = measure_text(L.note, kTick);
    L.note_h = m.h + 6;
    L.width = std::max(L.width, m.w + m.h + 4 + 2 * kMargin);
    L.height += L.note_h;
  }
  return L;
}

/// A cell with no value: grey, crossed by one diagonal hatch line.
void no_value_cell(const Canvas& c, double x, double y, double size) {
  c.rect(x, y, size + 0.35, size + 0.35, kNoValue);
  if (size >= 4) c.line(x + 0.5, y + size - 0.5, x + size - 0.5, y + 0.5, kGrey, std::max(0.5, size / 16));
}

void colour_bar(const Canvas& c, const Layout& L, double x, double top, double grid_h) {
  const double h = std::max(grid_h * 0.6, std::min(grid_h, 60.0)), y = top + (grid_h - h) / 2;
  const int steps = 64;
  for (int i = 0; i < steps; ++i) {
    const double t0 = static_cast<double>(i) / steps;
    c.rect(x, y + h * (1 - t0 - 1.0 / steps), kBarW, h / steps + 0.5, reds(t0 + 0.5 / steps));
  }
  c.frame(x, y, kBarW, h, kBlack, 0.6);
  auto ticks = nice_ticks(0, L.vmax, std::clamp(static_cast<int>(h / 28), 2, 5));  // labels >= ~28 units apart
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 0.1;
  for (double t : ticks) {
    if (t < 0 || t > L.vmax * (1 + 1e-6)) continue;
    const double ty = y + h * (1 - t / L.vmax);
    c.line(x + kBarW, ty, x + kBarW + kTickLen, ty, kBlack, 0.6);
    c.text(tick_label(t, step), x + kBarW + kTickLen + 2, ty, kTick, HAlign::Left, VAlign::Middle);
  }
}

}  // namespace

std::pair<double, double> heatmap_size(const HeatmapGrid& grid) {
  auto L = layout(grid);
  return {L.width, L.height};
}

void draw_heatmaps(const Canvas& c, const HeatmapGrid& g) {
  const auto L = layout(g);
  const auto& w = g.weights;  // [rows, cols, Q, K]
  const double grid_h = L.rows * L.mat_h + (L.rows - 1) * kGap;
  const double grid_w = L.cols * L.mat_w + (L.cols - 1) * kGap;
  if (!g.title.empty()) c.text(g.title, L.width / 2, kMargin, kTitle, HAlign::Center, VAlign::Top);
  const bool annotate = L.cell >= 36;  // print the weights in big cells (maps of a few tokens)
  for (int64_t r = 0; r < L.rows; ++r) {
    const double my = L.grid_y + r * (L.mat_h + kGap);
    if (r < static_cast<int64_t>(g.row_titles.size())) {
      c.text(g.row_titles[r], kMargin + L.ylabel_w, my + L.mat_h / 2, kHead, HAlign::Center, VAlign::Top, 90);
    }
    for (int64_t col = 0; col < L.cols; ++col) {
      const double mx = L.grid_x + col * (L.mat_w + kGap);
      if (r == 0 && col < static_cast<int64_t>(g.col_titles.size())) {
        c.text(g.col_titles[col], mx + L.mat_w / 2, L.grid_y - 4, kHead, HAlign::Center, VAlign::Bottom);
      }
      for (int64_t qi = 0; qi < L.q; ++qi) {
        for (int64_t ki = 0; ki < L.k; ++ki) {
          const float v = w.at({r, col, qi, ki});
          const double cx = mx + ki * L.cell, cy = my + qi * L.cell;
          if (!std::isfinite(v)) {
            no_value_cell(c, cx, cy, L.cell);
            if (annotate)
              c.text(fmt::format("{}", v), cx + L.cell / 2, cy + L.cell / 2, TextStyle{10}, HAlign::Center,
                     VAlign::Middle);
            continue;
          }
          c.rect(cx, cy, L.cell + 0.35, L.cell + 0.35, reds(v / L.vmax));  // overlap hides seams
          if (annotate) {
            const TextStyle t{10, false, v / L.vmax > 0.55 ? kWhite : kBlack};
            c.text(fmt::format("{:.2f}", v), cx + L.cell / 2, cy + L.cell / 2, t, HAlign::Center, VAlign::Middle);
          }
        }
      }
      c.frame(mx, my, L.mat_w, L.mat_h, kBlack, 0.6);
      if (col == 0) {  // query labels on the left of the first column
        for (int64_t qi = 0; qi < L.q; qi += L.q_every) {
          const double y = my + (qi + 0.5) * L.cell;
          c.line(mx - kTickLen, y, mx, y, kBlack, 0.6);
          c.text(L.qlabels[qi], mx - kTickLen - 2, y, kTick, HAlign::Right, VAlign::Middle);
        }
      }
      if (r == L.rows - 1) {  // key labels under the last row
        for (int64_t ki = 0; ki < L.k; ki += L.k_every) {
          const double x = mx + (ki + 0.5) * L.cell, y = my + L.mat_h;
          c.line(x, y, x, y + kTickLen, kBlack, 0.6);
          if (L.rotate_keys) {
            c.text(L.klabels[ki], x, y + kTickLen + 2, kTick, HAlign::Right, VAlign::Middle, 90);
          } else {
            c.text(L.klabels[ki], x, y + kTickLen + 2, kTick, HAlign::Center, VAlign::Top);
          }
        }
      }
    }
  }
  if (!g.xlabel.empty()) {
    c.text(g.xlabel, L.grid_x + grid_w / 2, L.height - kMargin - L.note_h, kLabel, HAlign::Center, VAlign::Bottom);
  }
  if (!L.note.empty()) {  // a grey swatch, then what it means
    const double sh = measure_text("Ag", kTick).h, y = L.height - kMargin - sh;
    no_value_cell(c, kMargin, y, sh);
    c.frame(kMargin, y, sh, sh, kBlack, 0.4);
    c.text(L.note, kMargin + sh + 4, y + sh / 2, kTick, HAlign::Left, VAlign::Middle);
  }
  if (!g.ylabel.empty()) c.text(g.ylabel, kMargin, L.grid_y + grid_h / 2, kLabel, HAlign::Center, VAlign::Top, 90);
  if (L.any_finite) colour_bar(c, L, L.grid_x + grid_w + kGap * 1.5, L.grid_y, grid_h);  // else no scale to show
}

}  // namespace attnlab::tools::plot
