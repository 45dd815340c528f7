#include "tools/plot/axes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace attnlab::tools::plot {
namespace {

constexpr double kTickFont = 10.5, kLabelFont = 12, kTitleFont = 13, kTickLen = 4, kPad = 5;

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

/// Data range with matplotlib's 5% margins (a flat range gets +-0.5 or +-5%).
std::pair<double, double> padded(Range r) {
  if (r.empty()) return {0, 1};
  if (r.hi - r.lo < 1e-12 * std::max(1.0, std::abs(r.hi))) {
    const double d = r.hi == 0 ? 0.5 : std::abs(r.hi) * 0.05;
    return {r.lo - d, r.hi + d};
  }
  const double m = (r.hi - r.lo) * 0.05;
  return {r.lo - m, r.hi + m};
}

std::string log_label(double exponent) {
  const double v = std::pow(10.0, exponent);
  if (exponent >= -3 && exponent <= 4) return fmt::format("{:g}", v);
  return fmt::format("1e{}", static_cast<int>(std::lround(exponent)));
}

}  // namespace

std::pair<std::vector<double>, std::vector<std::string>> log_ticks(double y0, double y1) {
  std::vector<double> ticks;
  std::vector<std::string> labels;
  for (double e = std::ceil(y0 - 1e-9); e <= y1 + 1e-9; e += 1) ticks.push_back(e);
  if (ticks.size() < 3) {  // less than two decades: add 2x and 5x ticks
    std::vector<double> more;
    for (double e = std::floor(y0); e <= y1; e += 1) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double t = e + std::log10(m);
        if (t >= y0 && t <= y1) more.push_back(t);
      }
    }
    ticks = more;
  }
  for (double t : ticks) labels.push_back(log_label(t));
  if (ticks.size() < 2) {
    // Within one decade (a loss from 0.31 to 0.45) no 1-2-5 value falls inside: even steps of the
    // values themselves, placed on the log axis, so that every panel has readable ticks.
    const double lo = std::pow(10.0, y0), hi = std::pow(10.0, y1);
    const auto values = nice_ticks(lo, hi, 4);
    const double step = values.size() > 1 ? values[1] - values[0] : lo;
    ticks.clear();
    labels.clear();
    for (double v : values) {
      if (!(v > 0)) continue;
      const double t = std::log10(v);
      if (t < y0 - 1e-12 || t > y1 + 1e-12) continue;
      ticks.push_back(t);
      labels.push_back(tick_label(v, step));
    }
  }
  return {ticks, labels};
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  if (!(step > 0) || step < 1e-6 || std::abs(value) >= 1e6) return fmt::format("{:g}", value);
  int decimals = 0;  // the fewest decimals that write the step exactly (0.25 -> 2, 0.1 -> 1, 5 -> 0)
  for (double scaled = step; decimals < 8 && std::abs(scaled - std::round(scaled)) > 1e-6 * scaled; ++decimals) {
    scaled *= 10;
  }
  return fmt::format("{:.{}f}", value, decimals);
}

void draw_legend(const Canvas& c, const std::vector<Series>& entries, double right, double top) {
  std::vector<const Series*> shown;
  for (const auto& s : entries) {
    if (!s.label.empty()) shown.push_back(&s);
  }
  if (shown.empty()) return;
  const TextStyle style{10.5};
  double text_w = 0;
  for (const auto* s : shown) text_w = std::max(text_w, c.measure(s->label, style).w);
  const double row = 16, swatch = 22, w = text_w + swatch + 3 * kPad, h = row * shown.size() + kPad;
  const double x = right - w - kPad, y = top + kPad;
  c.rect(x, y, w, h, kWhite.with_alpha(0.85));
  c.frame(x, y, w, h, kLightGrey, 0.8);
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto& s = *shown[i];
    const double cy = y + kPad / 2 + row * (i + 0.5), sx = x + kPad;
    if (s.line) c.line(sx, cy, sx + swatch, cy, s.color, s.width, s.dashed);
    if (s.marker == Marker::Dot) c.circle(sx + swatch / 2, cy, s.marker_size, s.color);
    if (s.marker == Marker::Cross) c.cross(sx + swatch / 2, cy, s.marker_size, s.color);
    c.text(s.label, sx + swatch + kPad, cy, style, HAlign::Left, VAlign::Middle);
  }
}

namespace {

/// The series' band (lo..hi) as filled polygons in its colour, translucent; a gap wherever a value
/// is missing (on a log axis a band edge at or below 0 is drawn at a tenth of the line's value).
template <class PX, class PY>
void draw_band(const Canvas& c, const Series& s, bool logy, const PX& px, const PY& py) {
  const size_t n = std::min({s.x.size(), s.y.size(), s.lo.size(), s.hi.size()});
  auto edge = [&](double v, size_t i) {
    if (logy && !(v > 0)) v = s.y[i] / 10;
    return py(logy ? std::log10(v) : v);
  };
  auto ok = [&](size_t i) {
    return std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && std::isfinite(s.lo[i]) && std::isfinite(s.hi[i]) &&
           (!logy || s.y[i] > 0);
  };
  cairo_t* cr = c.cr();
  c.set_color(s.color.with_alpha(0.2));
  for (size_t i = 0; i < n;) {
    if (!ok(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && ok(j)) ++j;
    cairo_move_to(cr, px(s.x[i]), edge(s.lo[i], i));
    for (size_t k = i + 1; k < j; ++k) cairo_line_to(cr, px(s.x[k]), edge(s.lo[k], k));
    for (size_t k = j; k-- > i;) cairo_line_to(cr, px(s.x[k]), edge(s.hi[k], k));
    cairo_close_path(cr);
    cairo_fill(cr);
    i = j;
  }
}

}  // namespace

void draw_axes(const Canvas& c, const Axes& a, double bx, double by, double bw, double bh) {
  // Data ranges (log space for y when logy).
  Range xr, yr;
  for (const auto& s : a.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (a.logy && !(s.y[i] > 0)) continue;
      xr.add(s.x[i]);
      yr.add(a.logy ? std::log10(s.y[i]) : s.y[i]);
    }
    for (size_t i = 0; i < std::min(s.lo.size(), s.hi.size()); ++i) {
      for (double v : {s.lo[i], s.hi[i]}) {
        if (std::isfinite(v) && (!a.logy || v > 0)) yr.add(a.logy ? std::log10(v) : v);
      }
    }
  }
  auto [x0, x1] = a.xlim ? *a.xlim : padded(xr);
  auto [y0, y1] =
      a.ylim ? (a.logy ? std::pair{std::log10(a.ylim->first), std::log10(a.ylim->second)} : *a.ylim) : padded(yr);
  auto xticks = nice_ticks(x0, x1, 6);
  if (a.integer_x) {
    xticks.erase(
        std::remove_if(xticks.begin(), xticks.end(), [](double t) { return std::abs(t - std::round(t)) > 1e-9; }),
        xticks.end());
  }
  std::vector<double> yticks;
  std::vector<std::string> ylabels;
  if (a.logy) {
    std::tie(yticks, ylabels) = log_ticks(y0, y1);
  } else {
    yticks = nice_ticks(y0, y1, 5);
    const double step = yticks.size() > 1 ? yticks[1] - yticks[0] : 1;
    for (double t : yticks) ylabels.push_back(tick_label(t, step));
  }
  const double xstep = xticks.size() > 1 ? xticks[1] - xticks[0] : 1;

  // Layout: title on top, y tick labels + y label on the left, x tick labels + x label below.
  const TextStyle tick{kTickFont}, label{kLabelFont}, title{kTitleFont, true};
  double ytick_w = 0;
  for (const auto& l : ylabels) ytick_w = std::max(ytick_w, c.measure(l, tick).w);
  const double th = c.measure("Ag", tick).h, lh = c.measure("Ag", label).h;
  const double top = by + (a.title.empty() ? kPad : c.measure(a.title, title).h + 2 * kPad);
  const double left = bx + kPad + (a.ylabel.empty() ? 0 : lh + kPad) + ytick_w + kTickLen + kPad;
  const double bottom = by + bh - kPad - (a.xlabel.empty() ? 0 : lh + kPad) - th - kTickLen - kPad;
  const double right = bx + bw - kPad * 2;
  const double pw = std::max(right - left, 10.0), ph = std::max(bottom - top, 10.0);
  auto px = [&](double v) { return left + (v - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return bottom - (v - y0) / (y1 - y0) * ph; };

  if (!a.title.empty()) c.text(a.title, left + pw / 2, by + kPad, title, HAlign::Center, VAlign::Top);
  for (size_t i = 0; i < xticks.size(); ++i) {
    const double x = px(xticks[i]);
    if (a.grid) c.line(x, top, x, bottom, kLightGrey, 0.7);
    c.line(x, bottom, x, bottom + kTickLen, kBlack, 0.8);
    c.text(tick_label(xticks[i], xstep), x, bottom + kTickLen + 2, tick, HAlign::Center, VAlign::Top);
  }
  for (size_t i = 0; i < yticks.size(); ++i) {
    const double y = py(yticks[i]);
    if (a.grid) c.line(left, y, left + pw, y, kLightGrey, 0.7);
    c.line(left - kTickLen, y, left, y, kBlack, 0.8);
    c.text(ylabels[i], left - kTickLen - 2, y, tick, HAlign::Right, VAlign::Middle);
  }
  if (!a.xlabel.empty()) c.text(a.xlabel, left + pw / 2, by + bh - kPad, label, HAlign::Center, VAlign::Bottom);
  if (!a.ylabel.empty()) c.text(a.ylabel, bx + kPad, top + ph / 2, label, HAlign::Center, VAlign::Top, 90);

  // Series, clipped to the plot area.
  cairo_t* cr = c.cr();
  cairo_save(cr);
  cairo_rectangle(cr, left, top, pw, ph);
  cairo_clip(cr);
  for (const auto& s : a.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    auto ok = [&](size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (!a.logy || s.y[i] > 0); };
    auto yv = [&](size_t i) { return py(a.logy ? std::log10(s.y[i]) : s.y[i]); };
    if (!s.lo.empty()) draw_band(c, s, a.logy, px, py);
    if (s.line) {
      cairo_save(cr);
      if (s.dashed) {
        const double dash[] = {6.0, 4.0};
        cairo_set_dash(cr, dash, 2, 0);
      }
      c.set_color(s.color);
      cairo_set_line_width(cr, s.width);
      bool pen = false;
      for (size_t i = 0; i < n; ++i) {
        if (!ok(i)) {
          pen = false;
          continue;
        }
        if (pen) {
          cairo_line_to(cr, px(s.x[i]), yv(i));
        } else {
          cairo_move_to(cr, px(s.x[i]), yv(i));
        }
        pen = true;
      }
      cairo_stroke(cr);
      cairo_restore(cr);
    }
    for (size_t i = 0; i < n && s.marker != Marker::None; ++i) {
      if (!ok(i)) continue;
      if (s.marker == Marker::Dot) c.circle(px(s.x[i]), yv(i), s.marker_size, s.color);
      if (s.marker == Marker::Cross) c.cross(px(s.x[i]), yv(i), s.marker_size, s.color);
    }
  }
  cairo_restore(cr);
  c.frame(left, top, pw, ph, kBlack, 0.8);
  if (a.legend) draw_legend(c, a.series, left + pw, top);
}

}  // namespace attnlab::tools::plot
