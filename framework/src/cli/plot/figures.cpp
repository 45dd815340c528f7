// Figures built from results files: metric panels, attention heatmaps, corner sequences,
// kernel regression. Drawing primitives are in canvas/axes/heatmap.
#include "cli/plot/figures.hpp"

#include "cli/plot/axes.hpp"
#include "cli/plot/canvas.hpp"
#include "cli/plot/heatmap.hpp"
#include "cli/stats.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace attnlab::cli::plot {
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

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kDouble).contiguous().reshape(-1);
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

/// An empty panel for one metric over epochs (log y for a loss when `log_losses`).
Axes epoch_axes(const std::string& metric, bool log_losses) {
  Axes a;
  a.title = metric;
  a.xlabel = per_step(metric) ? "optimizer step" : "epoch";
  a.integer_x = true;
  a.logy = log_losses && is_loss(metric);
  return a;
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
  Series s = metric_series(g.label, mean, longest ? longest->epochs : std::vector<double>{}, color);
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
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].metrics.find(m);
      if (it == runs[i].metrics.end()) continue;
      a.series.push_back(metric_series(run_label(runs[i], differing), it->second,
                                       per_step(m) ? std::vector<double>{} : runs[i].epochs,
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
  // Panel key -> series, in a stable order: train/val of a name together, *_train_mode/*_eval_mode together.
  std::map<std::string, Axes> panels;
  std::vector<std::string> order;
  // The same colour for the same label in every panel: train, val, test first, then the rest.
  std::map<std::string, int> colour_of = {{"train", 0}, {"val", 1}, {"test", 2}};
  int colour = 3;
  for (const auto& group : in.metric_groups()) {
    if (group == "epoch") continue;
    for (const auto& name : in.metric_names(group)) {
      if (name == "seconds") continue;
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
        a.xlabel = group == "step" ? "optimizer step" : "epoch";
        a.integer_x = true;
        a.logy = log_losses && is_loss(key);
        panels[key] = std::move(a);
      }
      if (!colour_of.count(label)) colour_of[label] = colour++;
      panels[key].series.push_back(metric_series(
          label, in.metric(group, name), group == "step" ? std::vector<double>{} : epochs, palette(colour_of[label])));
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

std::string corner_predictions(const results::ResultsReader& in) {
  for (const char* base : {"predictions/test", "predictions/val"}) {
    const std::string b = base;
    if (in.has(b + "/prediction") && in.has(b + "/source") && in.has(b + "/target")) {
      auto p = in.tensor(b + "/prediction");
      if (p.dim() == 3 && p.size(2) == 2) return b;
    }
  }
  return "";
}

void corners_figure(const results::ResultsReader& in, const std::string& base, const std::string& path, PixelSize size,
                    int count) {
  auto src = in.tensor(base + "/source"), tgt = in.tensor(base + "/target"), pred = in.tensor(base + "/prediction");
  torch::Tensor dirs = in.has(base + "/directions") ? in.tensor(base + "/directions") : torch::Tensor();  // [N]
  torch::Tensor lens = in.has(base + "/target_lengths") ? in.tensor(base + "/target_lengths") : torch::Tensor();
  std::vector<std::string> names = {"Counter-Clockwise", "Clockwise"};
  if (in.has_attr("directions_values")) names = in.attr_strings("directions_values");
  const int n = static_cast<int>(std::min<int64_t>(count, src.size(0)));
  ATTNLAB_CHECK(n > 0, Error, "plot {}: {} holds no sequences", path, base);
  const int cols = std::min(n, 5), rows = (n + cols - 1) / cols;
  const double cell = 210, title_h = 22, legend_h = 30;
  const TextStyle title{12, true};
  Canvas c(path, cols * cell + 2 * kMargin, rows * (cell + title_h) + legend_h + 2 * kMargin, size.width, size.height);
  const Color input = kBlack, target = palette(0), predicted = palette(3);
  for (int i = 0; i < n; ++i) {
    const double ox = kMargin + (i % cols) * cell, oy = kMargin + (i / cols) * (cell + title_h);
    const double box = cell - 24, bx = ox + 12, by = oy + title_h;
    auto px = [&](double v) { return bx + (v + 1.6) / 3.2 * box; };
    auto py = [&](double v) { return by + (1.6 - v) / 3.2 * box; };
    std::string t = fmt::format("#{}", i);
    if (dirs.defined()) {
      const auto d = static_cast<int64_t>(dirs[i].item<float>());
      std::string name = d >= 0 && d < static_cast<int64_t>(names.size()) ? names[d] : std::to_string(d);
      if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
      t += " " + name;
    }
    c.text(t, ox + cell / 2, oy + title_h - 4, title, HAlign::Center, VAlign::Bottom);
    c.frame(bx, by, box, box, kLightGrey, 0.8);
    const double sq[5][2] = {{-1, -1}, {-1, 1}, {1, 1}, {1, -1}, {-1, -1}};
    for (int k = 0; k < 4; ++k)
      c.line(px(sq[k][0]), py(sq[k][1]), px(sq[k + 1][0]), py(sq[k + 1][1]), kGrey, 0.8, true);
    auto s = src[i], g = tgt[i], p = pred[i];  // [2, 2] each
    const int64_t valid = lens.defined() ? static_cast<int64_t>(lens[i].item<float>()) : g.size(0);
    auto pt = [](const torch::Tensor& seq, int64_t k) {
      return std::pair{seq[k][0].item<double>(), seq[k][1].item<double>()};
    };
    auto last = pt(s, s.size(0) - 1);
    // Input: the source points, dashed; target and prediction start from the last source point.
    for (int64_t k = 0; k + 1 < s.size(0); ++k) {
      auto a = pt(s, k), b = pt(s, k + 1);
      c.line(px(a.first), py(a.second), px(b.first), py(b.second), input, 2.0, true);
    }
    auto prev = last;
    for (int64_t k = 0; k < valid; ++k) {
      auto b = pt(g, k);
      c.line(px(prev.first), py(prev.second), px(b.first), py(b.second), target, 2.2);
      prev = b;
    }
    prev = last;
    for (int64_t k = 0; k < p.size(0) && k < valid; ++k) {
      auto b = pt(p, k);
      c.line(px(prev.first), py(prev.second), px(b.first), py(b.second), predicted, 1.8, true);
      prev = b;
    }
    for (int64_t k = 0; k < s.size(0); ++k) c.circle(px(pt(s, k).first), py(pt(s, k).second), 4, input);
    for (int64_t k = 0; k < valid; ++k) c.circle(px(pt(g, k).first), py(pt(g, k).second), 4, target);
    for (int64_t k = 0; k < p.size(0) && k < valid; ++k)
      c.cross(px(pt(p, k).first), py(pt(p, k).second), 4.5, predicted, 2);
  }
  // One legend for the figure, centred under the panels.
  std::vector<Series> legend = {{"Input", {}, {}, input, true, true, 2.0, Marker::Dot, 4},
                                {"Target", {}, {}, target, true, false, 2.2, Marker::Dot, 4},
                                {"Predicted", {}, {}, predicted, true, true, 1.8, Marker::Cross, 4}};
  const double lw = 3 * 120;
  double lx = kMargin + (cols * cell - lw) / 2;
  const double ly = kMargin + rows * (cell + title_h) + legend_h / 2;
  for (const auto& e : legend) {
    c.line(lx, ly, lx + 26, ly, e.color, e.width, e.dashed);
    if (e.marker == Marker::Dot) c.circle(lx + 13, ly, 4, e.color);
    if (e.marker == Marker::Cross) c.cross(lx + 13, ly, 4, e.color, 2);
    c.text(e.label, lx + 32, ly, TextStyle{11}, HAlign::Left, VAlign::Middle);
    lx += 120;
  }
  c.finish();
}

bool has_kernel_regression(const results::ResultsReader& in) {
  if (!in.has("predictions/x") || !in.has("predictions/truth") || !in.has("predictions/test")) return false;
  return in.tensor("predictions/test").numel() == in.tensor("predictions/x").numel();
}

void kernel_regression_figure(const results::ResultsReader& in, const std::string& path, PixelSize size) {
  Axes a;
  a.title = in.attr_string("experiment");
  a.xlabel = "x";
  a.ylabel = "y";
  a.xlim = std::pair{0.0, 5.0};
  a.ylim = std::pair{-1.0, 5.0};
  auto x = to_vector(in.tensor("predictions/x"));
  a.series.push_back({"Truth", x, to_vector(in.tensor("predictions/truth")), palette(0)});
  Series pred{"Pred", x, to_vector(in.tensor("predictions/test")), Color{0.75, 0, 0.75, 1}};
  pred.dashed = true;
  a.series.push_back(pred);
  if (in.has("data/x_train") && in.has("data/y_train")) {
    Series pts{"", to_vector(in.tensor("data/x_train")), to_vector(in.tensor("data/y_train")),
               palette(1).with_alpha(0.5)};
    pts.line = false;
    pts.marker = Marker::Dot;
    a.series.push_back(pts);
  }
  Canvas c(path, kPanelW + 2 * kMargin, kPanelH + 2 * kMargin, size.width, size.height);
  draw_axes(c, a, kMargin, kMargin, kPanelW, kPanelH);
  c.finish();
}

}  // namespace attnlab::cli::plot
