// Figures built from results files: metric panels and attention heatmaps (the figures plugins
// declare are declared.cpp's). Drawing primitives are in canvas/axes/heatmap.
#include "tools/plot/figures.hpp"

#include "tools/plot/axes.hpp"
#include "tools/plot/canvas.hpp"
#include "tools/plot/heatmap.hpp"
#include "tools/stats.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace attnlab::tools::plot {
namespace {

constexpr double kPanelW = 430, kPanelH = 300, kMargin = 10;

/// `text` cut with an ellipsis to fit `width` user units.
std::string fit_text(const std::string& text, double width, const TextStyle& style) {
  if (measure_text(text, style).w <= width) return text;
  std::string t = text;
  while (!t.empty() && measure_text(t + "\u2026", style).w > width) {
    t.pop_back();
    while (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0x80)
      t.pop_back();  // whole UTF-8 code points
  }
  return t + "\u2026";
}

/// Panels in a grid of at most `max_cols` columns, each kPanelW x kPanelH, under an optional
/// figure title and an optional figure legend (one line per entry; the panels then have none).
void panels_figure(std::vector<Axes> panels, const std::string& title, const std::vector<Series>& legend,
                   const std::string& path, PixelSize size, int max_cols = 3) {
  ATTNLAB_CHECK(!panels.empty(), Error, "plot {}: nothing to draw (no metric series)", path);
  const int n = static_cast<int>(panels.size());
  const int cols = std::min(n, max_cols), rows = (n + cols - 1) / cols;
  const double width = cols * kPanelW;
  const TextStyle ts{14, true}, ls{11};
  const double title_h = title.empty() ? 0 : measure_text(title, ts).h + 10;
  const double row_h = 17, legend_h = legend.empty() ? 0 : row_h * static_cast<double>(legend.size()) + 8;
  Canvas c(path, width + 2 * kMargin, rows * kPanelH + 2 * kMargin + title_h + legend_h, size.width, size.height);
  if (!title.empty()) {
    c.text(fit_text(title, width, ts), kMargin + width / 2, kMargin, ts, HAlign::Center, VAlign::Top);
  }
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = kMargin + title_h + row_h * (static_cast<double>(i) + 0.5), x = kMargin + 12;
    c.line(x, y, x + 24, y, legend[i].color, 2.2);
    c.text(fit_text(legend[i].label, width - 60, ls), x + 32, y, ls, HAlign::Left, VAlign::Middle);
  }
  for (int i = 0; i < n; ++i) {
    if (!legend.empty()) panels[i].legend = false;
    draw_axes(c, panels[i], kMargin + (i % cols) * kPanelW, kMargin + title_h + legend_h + (i / cols) * kPanelH,
              kPanelW, kPanelH);
  }
  c.finish();
}

/// x values for a series of n rows: the epoch numbers when they line up, else 1..n.
std::vector<double> epochs_for(size_t n, const std::vector<double>& epochs) {
  if (epochs.size() == n) return epochs;
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i + 1);
  return x;
}

/// A series; single values (a test loss) become one marker at the last epoch.
Series metric_series(std::string label, const std::vector<double>& y, const std::vector<double>& epochs, Color color) {
  Series s{std::move(label), epochs_for(y.size(), epochs), y, color};
  if (y.size() == 1) {
    s.x = {epochs.empty() ? 1.0 : epochs.back()};
    s.line = false;
    s.marker = Marker::Dot;
    s.marker_size = 4.5;
  }
  return s;
}

bool is_loss(const std::string& name) { return name.find("loss") != std::string::npos; }

/// An empty panel for one metric over epochs (log y for a loss when `log_losses`).
Axes epoch_axes(const std::string& metric, bool log_losses) {
  Axes a;
  a.title = metric;
  a.xlabel = per_step(metric) ? "optimizer step" : "epoch";
  a.integer_x = true;
  a.logy = log_losses && is_loss(metric);
  return a;
}

/// Whether every run that has `metric` counts its reports in optimizer steps (report_steps), so
/// that its panel is drawn against the step.
bool by_step(const std::vector<Run>& runs, const std::string& metric) {
  if (per_step(metric) || metric == "train/step") return false;
  bool any = false;
  for (const auto& r : runs) {
    const auto it = r.metrics.find(metric);
    if (it == r.metrics.end()) continue;
    if (report_steps(r, it->second.size()) == nullptr) return false;
    any = true;
  }
  return any;
}

/// The x of a run's per-epoch series of `rows` values: its steps when `steps`, else its epochs.
std::vector<double> x_of(const Run& run, size_t rows, bool steps) {
  if (steps) return *report_steps(run, rows);
  return run.epochs;
}

/// Curves only: a metric with one value per run (a test loss) is left to the table, unless
/// nothing else was chosen.
std::vector<std::string> curve_metrics(const std::vector<Run>& runs, const std::vector<std::string>& metrics) {
  std::vector<std::string> curves;
  for (const auto& m : metrics) {
    if (std::any_of(runs.begin(), runs.end(), [&](const Run& r) {
          auto it = r.metrics.find(m);
          return it != r.metrics.end() && it->second.size() > 1;
        })) {
      curves.push_back(m);
    }
  }
  return curves.empty() ? metrics : curves;
}

/// The group's mean curve of `metric` with lo/hi = mean -/+ sample sd, row by row over the runs
/// that have a finite value in that row; x from the longest run's epochs.
Series group_series(const Group& g, const std::string& metric, Color color) {
  size_t rows = 0;
  const Run* longest = nullptr;
  for (const Run* r : g.runs) {
    auto it = r->metrics.find(metric);
    if (it != r->metrics.end() && it->second.size() > rows) {
      rows = it->second.size();
      longest = r;
    }
  }
  std::vector<double> mean(rows, NAN), lo(rows, NAN), hi(rows, NAN);
  for (size_t i = 0; i < rows; ++i) {
    std::vector<double> v;
    for (const Run* r : g.runs) {
      auto it = r->metrics.find(metric);
      if (it != r->metrics.end() && i < it->second.size() && std::isfinite(it->second[i])) v.push_back(it->second[i]);
    }
    const auto d = stats::describe(v);
    mean[i] = d.mean;
    if (d.n >= 2) {
      lo[i] = d.mean - d.sd;
      hi[i] = d.mean + d.sd;
    }
  }
  const bool steps = longest != nullptr && report_steps(*longest, rows) != nullptr;
  Series s = metric_series(g.label, mean, longest ? x_of(*longest, rows, steps) : std::vector<double>{}, color);
  s.lo = std::move(lo);
  s.hi = std::move(hi);
  return s;
}

}  // namespace

void group_figure(const std::vector<Group>& groups, const std::vector<std::string>& metrics, const std::string& path,
                  PixelSize size, bool log_losses) {
  std::vector<Run> runs;
  for (const auto& g : groups) {
    for (const Run* r : g.runs) runs.push_back(*r);
  }
  std::vector<Axes> panels;
  for (const auto& m : curve_metrics(runs, metrics)) {
    Axes a = epoch_axes(m, log_losses);
    if (by_step(runs, m)) a.xlabel = "optimizer step";
    for (size_t i = 0; i < groups.size(); ++i)
      a.series.push_back(group_series(groups[i], m, palette(static_cast<int>(i))));
    panels.push_back(std::move(a));
  }
  std::vector<Series> legend;
  for (size_t i = 0; i < groups.size(); ++i) {
    legend.push_back({fmt::format("{} (n={}): mean ± 1 sd", groups[i].label, groups[i].runs.size()),
                      {},
                      {},
                      palette(static_cast<int>(i))});
  }
  panels_figure(std::move(panels), "", legend, path, size);
}

void compare_figure(const std::vector<Run>& runs, const std::vector<std::string>& metrics,
                    const std::vector<std::string>& differing, const std::string& path, PixelSize size,
                    bool log_losses) {
  std::vector<Axes> panels;
  for (const auto& m : curve_metrics(runs, metrics)) {
    Axes a = epoch_axes(m, log_losses);
    const bool steps = by_step(runs, m);
    if (steps) a.xlabel = "optimizer step";
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].metrics.find(m);
      if (it == runs[i].metrics.end()) continue;
      a.series.push_back(metric_series(run_label(runs[i], differing), it->second,
                                       per_step(m) ? std::vector<double>{} : x_of(runs[i], it->second.size(), steps),
                                       palette(static_cast<int>(i))));
    }
    panels.push_back(std::move(a));
  }
  // One legend for the figure: the run's experiment and the values of the keys that differ.
  std::vector<Series> legend;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto differs = differs_text(runs[i], differing, 3, 40);
    legend.push_back({differs.empty() ? runs[i].experiment : fmt::format("{}: {}", runs[i].experiment, differs),
                      {},
                      {},
                      palette(static_cast<int>(i))});
  }
  panels_figure(std::move(panels), "", legend, path, size);
}

bool losses_figure(const results::ResultsReader& in, const std::string& path, PixelSize size, bool log_losses) {
  std::vector<double> epochs;
  if (in.metric_groups().size() && in.has("metrics/epoch/index")) epochs = in.metric("epoch", "index");
  // A step-counted run (the lm trainer with max_steps): its reports drawn at their optimizer step.
  std::vector<double> steps;
  if (in.has("metrics/train/step")) steps = in.metric("train", "step");
  const bool by_steps = !steps.empty() && steps.size() == epochs.size() &&
                        std::all_of(steps.begin(), steps.end(), [](double s) { return std::isfinite(s); });
  // Panel key -> series, in a stable order: train/val of a name together, *_train_mode/*_eval_mode together.
  std::map<std::string, Axes> panels;
  std::vector<std::string> order;
  // The same colour for the same label in every panel: train, val, test first, then the rest.
  std::map<std::string, int> colour_of = {{"train", 0}, {"val", 1}, {"test", 2}};
  int colour = 3;
  for (const auto& group : in.metric_groups()) {
    if (group == "epoch") continue;
    for (const auto& name : in.metric_names(group)) {
      if (name == "seconds" || (by_steps && group == "train" && name == "step")) continue;
      std::string key = name, label = group;
      for (const char* mode : {"_train_mode", "_eval_mode"}) {
        if (name.ends_with(mode)) {
          key = name.substr(0, name.size() - std::string(mode).size());
          label = fmt::format("{} ({} mode)", group, std::string(mode).substr(1, std::string(mode).size() - 6));
        }
      }
      if (!panels.count(key)) {
        order.push_back(key);
        Axes a;
        a.title = key;
        a.xlabel = group == "step" || by_steps ? "optimizer step" : "epoch";
        a.integer_x = true;
        a.logy = log_losses && is_loss(key);
        panels[key] = std::move(a);
      }
      if (!colour_of.count(label)) colour_of[label] = colour++;
      panels[key].series.push_back(metric_series(
          label, in.metric(group, name), group == "step" ? std::vector<double>{} : by_steps ? steps : epochs,
          palette(colour_of[label])));
    }
  }
  if (order.empty()) return false;
  std::vector<Axes> list;
  for (const auto& k : order) list.push_back(panels[k]);
  panels_figure(std::move(list), fmt::format("{} ({})", in.attr_string("experiment"), in.attr_string("status")), {},
                path, size);
  return true;
}

void attention_figure(const results::ResultsReader& in, const std::string& sample, const std::string& module,
                      const std::string& path, PixelSize size) {
  auto att = in.attention(sample, module);  // weights [layers, heads, Q, K]
  HeatmapGrid g;
  g.weights = att.weights;
  g.query_labels = att.query_tokens;
  g.key_labels = att.key_tokens;
  for (int64_t layer : att.layers) g.row_titles.push_back(fmt::format("layer {}", layer + 1));
  for (int64_t h = 0; h < g.weights.size(1); ++h) g.col_titles.push_back(fmt::format("head {}", h + 1));
  g.title = fmt::format("{}: {}", module, sample);
  auto [w, h] = heatmap_size(g);
  Canvas c(path, w, h, size.width, size.height);
  draw_heatmaps(c, g);
  c.finish();
}

}  // namespace attnlab::tools::plot
