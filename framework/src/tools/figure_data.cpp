#include "tools/figure_data.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace attnlab::tools {
namespace {

using results::FigureKind;

/// Reads what one figure names, every failure an Error that says which figure and dataset.
class Reader {
 public:
  Reader(const results::ResultsReader& in, const results::Figure& f) : in_(in), f_(f) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("figure '{}' of {} (declared by {}): {}", f_.name, in_.path(), f_.declared_by, what));
  }

  results::FloatArray numbers(const std::string& path) const {
    if (!in_.has(path)) fail(fmt::format("it draws {}, which the file does not hold", path));
    if (in_.holds_strings(path)) fail(fmt::format("{} holds strings, where numbers are needed", path));
    return in_.array(path);
  }

  /// A 1-D column of numbers or strings, as text.
  std::vector<std::string> column(const std::string& path) const {
    if (!in_.has(path)) fail(fmt::format("it draws {}, which the file does not hold", path));
    if (in_.holds_strings(path)) return in_.strings(path);
    std::vector<std::string> out;
    for (float v : in_.array(path).values) out.push_back(cell_text(v));
    return out;
  }

  std::vector<std::string> strings(const std::string& path) const {
    if (!in_.has(path)) fail(fmt::format("it draws {}, which the file does not hold", path));
    if (!in_.holds_strings(path)) fail(fmt::format("{} holds numbers, where labels (strings) are needed", path));
    return in_.strings(path);
  }

 private:
  const results::ResultsReader& in_;
  const results::Figure& f_;
};

std::string shape_text(const results::FloatArray& a) { return fmt::format("[{}]", fmt::join(a.shape, ", ")); }

/// Indices 0 .. n - 1 thinned to at most `max` (0 = all), evenly, the last kept.
std::vector<size_t> thinned(size_t n, int64_t max) {
  std::vector<size_t> rows;
  if (max <= 1 || n <= static_cast<size_t>(max)) {
    for (size_t i = 0; i < n; ++i) rows.push_back(i);
    return rows;
  }
  const size_t stride = (n + static_cast<size_t>(max) - 2) / static_cast<size_t>(max - 1);
  for (size_t i = 0; i < n; i += stride) rows.push_back(i);
  if (rows.back() != n - 1) rows.push_back(n - 1);
  return rows;
}

void read_curve(const Reader& r, FigureData& d, const FigureLimits& limits) {
  for (const auto& spec : d.spec.layers) {
    LayerData l{spec, {}, {}, {}, {}, {}};
    const auto y = r.numbers(spec.y);
    std::vector<double> xs;
    if (!spec.x.empty()) {
      const auto x = r.numbers(spec.x);
      if (x.numel() != y.numel()) {
        r.fail(fmt::format("x {} holds {} values and y {} holds {}", spec.x, x.numel(), spec.y, y.numel()));
      }
      xs.assign(x.values.begin(), x.values.end());
    } else {
      for (int64_t i = 0; i < y.numel(); ++i) xs.push_back(static_cast<double>(i));
    }
    d.total = std::max(d.total, y.numel());
    for (size_t i : thinned(xs.size(), limits.curve_points)) {
      l.x.push_back(xs[i]);
      l.y.push_back(y.values[i]);
    }
    d.shown = std::max(d.shown, static_cast<int64_t>(l.x.size()));
    d.layers.push_back(std::move(l));
  }
  if (d.shown < d.total) d.note = fmt::format("{} of {} points per curve (evenly spaced)", d.shown, d.total);
}

void read_sequences(const Reader& r, FigureData& d) {
  const auto& f = d.spec;
  std::vector<results::FloatArray> data;
  d.total = -1;
  for (const auto& spec : f.layers) {
    auto a = r.numbers(spec.data);
    if (a.dim() != 3 || a.size(2) != 2) {
      r.fail(fmt::format("{} should be [N, T, 2] (N sequences of T points), found {}", spec.data, shape_text(a)));
    }
    d.total = d.total < 0 ? a.size(0) : std::min(d.total, a.size(0));
    data.push_back(std::move(a));
  }
  d.shown = std::min(d.total, f.panels);
  if (d.shown < d.total) d.note = fmt::format("the first {} of {} sequences", d.shown, d.total);
  std::vector<double> labels;
  if (!f.panel_labels.empty()) {
    const auto a = r.numbers(f.panel_labels);
    labels.assign(a.values.begin(), a.values.end());
  }
  for (int64_t i = 0; i < d.shown; ++i) {
    std::string title = fmt::format("#{}", i);
    if (static_cast<size_t>(i) < labels.size()) {
      const auto v = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
      const bool named = v >= 0 && v < static_cast<int64_t>(f.label_names.size());
      std::string name = named ? f.label_names[static_cast<size_t>(v)] : cell_text(labels[static_cast<size_t>(i)]);
      if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
      title += " " + name;
    }
    d.panel_titles.push_back(std::move(title));
  }
  for (size_t k = 0; k < f.layers.size(); ++k) {
    const auto& spec = f.layers[k];
    LayerData l{spec, {}, {}, {}, {}, {}};
    std::vector<double> lengths;
    if (!spec.lengths.empty()) {
      const auto a = r.numbers(spec.lengths);
      if (a.numel() < d.total) {
        r.fail(fmt::format("{} holds {} lengths for {} sequences", spec.lengths, a.numel(), d.total));
      }
      lengths.assign(a.values.begin(), a.values.end());
    }
    // The layer whose last point this one's line starts from.
    const LayerData* from = nullptr;
    for (size_t e = 0; e < k; ++e) {
      if (!spec.continues.empty() && f.layers[e].label == spec.continues) from = &d.layers[e];
    }
    const auto& a = data[k];
    for (int64_t i = 0; i < d.shown; ++i) {
      int64_t n = a.size(1);
      if (!lengths.empty()) n = std::clamp<int64_t>(static_cast<int64_t>(lengths[static_cast<size_t>(i)]), 0, n);
      Points seq;
      if (from != nullptr && !from->sequences[static_cast<size_t>(i)].empty()) {
        seq.push_back(from->sequences[static_cast<size_t>(i)].back());
      }
      for (int64_t t = 0; t < n; ++t) seq.emplace_back(a.at({i, t, 0}), a.at({i, t, 1}));
      l.sequences.push_back(std::move(seq));
    }
    d.layers.push_back(std::move(l));
  }
}

void read_heatmap(const Reader& r, FigureData& d, const FigureLimits& limits) {
  const auto& spec = d.spec.layers.front();
  LayerData l{spec, {}, {}, {}, {}, {}};
  l.cells = r.numbers(spec.data);
  if (l.cells.dim() != 2) r.fail(fmt::format("{} should be [rows, columns], found {}", spec.data, shape_text(l.cells)));
  if (limits.heatmap_cells > 0 && l.cells.numel() > limits.heatmap_cells) {
    r.fail(fmt::format("{} has {} cells, more than the {} a page holds; draw it with runner plot", spec.data,
                       l.cells.numel(), limits.heatmap_cells));
  }
  const auto labels = [&](const std::string& path, int64_t n, const char* what) {
    if (path.empty()) return std::vector<std::string>{};
    auto v = r.strings(path);
    if (static_cast<int64_t>(v.size()) != n) {
      r.fail(fmt::format("{} holds {} {} labels for {} {}s", path, v.size(), what, n, what));
    }
    return v;
  };
  d.row_labels = labels(d.spec.row_labels, l.cells.size(0), "row");
  d.column_labels = labels(d.spec.column_labels, l.cells.size(1), "column");
  d.total = d.shown = l.cells.size(0);
  d.layers.push_back(std::move(l));
}

void read_table(const Reader& r, FigureData& d, const FigureLimits& limits) {
  for (const auto& spec : d.spec.layers) {
    LayerData l{spec, {}, {}, {}, {}, {}};
    l.column = r.column(spec.data);
    d.total = std::max(d.total, static_cast<int64_t>(l.column.size()));
    d.layers.push_back(std::move(l));
  }
  d.shown = limits.table_rows > 0 ? std::min(d.total, limits.table_rows) : d.total;
  for (auto& l : d.layers) {
    l.column.resize(static_cast<size_t>(d.shown));  // a shorter column: empty cells
  }
  if (d.shown < d.total) d.note = fmt::format("the first {} of {} rows", d.shown, d.total);
}

}  // namespace

std::string cell_text(double v) {
  if (std::isfinite(v) && v == std::round(v) && std::abs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.6g}", v);
}

FigureData read_figure_data(const results::ResultsReader& in, const results::Figure& figure,
                            const FigureLimits& limits) {
  FigureData d;
  d.spec = figure;
  if (d.spec.title.empty()) d.spec.title = in.attr_string("experiment");
  const Reader r(in, d.spec);
  switch (figure.kind) {
    case FigureKind::curve:
      read_curve(r, d, limits);
      break;
    case FigureKind::sequences:
      read_sequences(r, d);
      break;
    case FigureKind::heatmap:
      read_heatmap(r, d, limits);
      break;
    case FigureKind::table:
      read_table(r, d, limits);
      break;
  }
  return d;
}

}  // namespace attnlab::tools
