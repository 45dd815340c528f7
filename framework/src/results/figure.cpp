// Declared figures (attnlab/results/figure.hpp): stored as /figures/<name>, a group whose
// attributes hold the figure's fields and whose subgroups layer_00, layer_01, ... hold its layers
// (docs/PLUGINS.md, "Figures: how your data is drawn"; docs/RESULTS.md, "Layout").
#include <attnlab/results/figure.hpp>

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>

namespace attnlab::results {
namespace {

constexpr const char* kRoot = "figures";

struct Named {
  const char* name;
  int value;
};
constexpr Named kKinds[] = {{"curve", static_cast<int>(FigureKind::curve)},
                            {"sequences", static_cast<int>(FigureKind::sequences)},
                            {"heatmap", static_cast<int>(FigureKind::heatmap)},
                            {"table", static_cast<int>(FigureKind::table)}};
constexpr Named kStyles[] = {{"line", static_cast<int>(Style::line)},
                             {"dashed", static_cast<int>(Style::dashed)},
                             {"points", static_cast<int>(Style::points)}};
constexpr Named kMarkers[] = {{"none", static_cast<int>(Marker::none)},
                              {"dot", static_cast<int>(Marker::dot)},
                              {"cross", static_cast<int>(Marker::cross)}};

template <size_t N>
const char* name_of(const Named (&table)[N], int value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return "?";
}

/// The value named `text` in `table`; ResultsError naming the figure and the choices otherwise.
template <size_t N>
int value_of(const Named (&table)[N], const std::string& text, const std::string& where) {
  std::string choices;
  for (const auto& e : table) {
    if (text == e.name) return e.value;
    choices += choices.empty() ? e.name : std::string("|") + e.name;
  }
  throw ResultsError(fmt::format("{}: expected one of {}, found '{}'", where, choices, text));
}

/// When a figure is declared, in nanoseconds since 1970 (UTC), later than every earlier
/// declaration of this process: the figures' order, across the processes of a resumed run too.
int64_t declaration_time() {
  static std::atomic<int64_t> last{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  int64_t prev = last.load();
  int64_t mine = std::max(now, prev + 1);
  while (!last.compare_exchange_weak(prev, mine)) mine = std::max(now, prev + 1);
  return mine;
}

std::string layer_group(const std::string& figure, size_t i) {
  return fmt::format("{}/{}/layer_{:02}", kRoot, figure, i);
}

/// What a figure of `kind` needs of each layer, or "" when the layer has it.
std::string missing_field(FigureKind kind, const FigureLayer& l) {
  switch (kind) {
    case FigureKind::curve:
      return l.y.empty() ? "y (the dataset of y values)" : "";
    case FigureKind::sequences:
      return l.data.empty() ? "data (an [N, T, 2] dataset of points)" : "";
    case FigureKind::heatmap:
      return l.data.empty() ? "data (a [rows, columns] dataset)" : "";
    case FigureKind::table:
      return l.data.empty() ? "data (a 1-D dataset: the column)" : "";
  }
  return "";
}

void check_range(const std::optional<std::pair<double, double>>& r, const char* axis, const std::string& where) {
  if (!r) return;
  ATTNLAB_CHECK(std::isfinite(r->first) && std::isfinite(r->second) && r->first < r->second, ResultsError,
                "{}: {} must be a finite range [low, high] with low < high, found [{}, {}]", where, axis, r->first,
                r->second);
}

void check(const Figure& f, const std::string& where) {
  ATTNLAB_CHECK(!f.name.empty() && f.name.size() <= 64 &&
                    std::all_of(f.name.begin(), f.name.end(),
                                [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-'; }),
                ResultsError, "{}: the name must be 1 to 64 letters, digits, '_' or '-' (it names a file)", where);
  ATTNLAB_CHECK(!f.layers.empty(), ResultsError, "{}: a figure needs at least one layer", where);
  ATTNLAB_CHECK(f.kind != FigureKind::heatmap || f.layers.size() == 1, ResultsError,
                "{}: a heatmap draws one dataset, found {} layers", where, f.layers.size());
  ATTNLAB_CHECK(f.panels >= 1 && f.panels <= 100, ResultsError, "{}: panels must be 1 to 100, found {}", where,
                f.panels);
  check_range(f.xlim, "xlim", where);
  check_range(f.ylim, "ylim", where);
  for (size_t i = 0; i < f.layers.size(); ++i) {
    const auto& l = f.layers[i];
    const auto missing = missing_field(f.kind, l);
    ATTNLAB_CHECK(missing.empty(), ResultsError, "{}: layer {} ('{}') of a {} figure needs {}", where, i, l.label,
                  figure_kind_name(f.kind), missing);
    if (!l.continues.empty()) {
      const bool earlier = std::any_of(f.layers.begin(), f.layers.begin() + static_cast<std::ptrdiff_t>(i),
                                       [&](const FigureLayer& e) { return e.label == l.continues; });
      ATTNLAB_CHECK(earlier, ResultsError, "{}: layer {} ('{}') continues '{}', which is no earlier layer's label",
                    where, i, l.label, l.continues);
    }
  }
}

/// The strings of attribute `name` of `path` if it has it, else {}.
std::vector<std::string> strings_or_none(const ResultsReader& in, const std::string& path, const char* name) {
  return in.has_attr_at(path, name) ? in.attr_strings_at(path, name) : std::vector<std::string>{};
}
std::string string_or_empty(const ResultsReader& in, const std::string& path, const char* name) {
  return in.has_attr_at(path, name) ? in.attr_string_at(path, name) : std::string();
}
std::optional<std::pair<double, double>> range_or_none(const ResultsReader& in, const std::string& path,
                                                       const char* name) {
  if (!in.has_attr_at(path, name)) return std::nullopt;
  const auto v = in.attr_doubles_at(path, name);
  ATTNLAB_CHECK(v.size() == 2, ResultsError, "results file {}: attribute '{}' of /{} should hold 2 numbers, found {}",
                in.path(), name, path, v.size());
  return std::pair{v[0], v[1]};
}

Figure read_figure(const ResultsReader& in, const std::string& name) {
  const std::string at = std::string(kRoot) + "/" + name;
  const std::string where = fmt::format("results file {}: figure '{}'", in.path(), name);
  Figure f;
  f.name = name;
  f.kind = static_cast<FigureKind>(value_of(kKinds, in.attr_string_at(at, "kind"), where + " kind"));
  f.title = string_or_empty(in, at, "title");
  f.xlabel = string_or_empty(in, at, "xlabel");
  f.ylabel = string_or_empty(in, at, "ylabel");
  f.xlim = range_or_none(in, at, "xlim");
  f.ylim = range_or_none(in, at, "ylim");
  if (in.has_attr_at(at, "panels")) f.panels = static_cast<int64_t>(in.attr_double_at(at, "panels"));
  f.panel_labels = string_or_empty(in, at, "panel_labels");
  f.label_names = strings_or_none(in, at, "label_names");
  if (in.has_attr_at(at, "outline")) {
    const auto xy = in.attr_doubles_at(at, "outline");  // x0, y0, x1, y1, ...
    for (size_t i = 0; i + 1 < xy.size(); i += 2) f.outline.emplace_back(xy[i], xy[i + 1]);
  }
  f.row_labels = string_or_empty(in, at, "row_labels");
  f.column_labels = string_or_empty(in, at, "column_labels");
  f.declared_by = string_or_empty(in, at, "declared_by");
  for (size_t i = 0;; ++i) {
    const auto lg = layer_group(name, i);
    if (!in.has(lg)) break;
    FigureLayer l;
    l.label = string_or_empty(in, lg, "label");
    l.x = string_or_empty(in, lg, "x");
    l.y = string_or_empty(in, lg, "y");
    l.data = string_or_empty(in, lg, "data");
    l.lengths = string_or_empty(in, lg, "lengths");
    l.continues = string_or_empty(in, lg, "continues");
    const auto layer_where = fmt::format("{} layer {}", where, i);
    if (in.has_attr_at(lg, "style")) {
      l.style = static_cast<Style>(value_of(kStyles, in.attr_string_at(lg, "style"), layer_where + " style"));
    }
    if (in.has_attr_at(lg, "marker")) {
      l.marker = static_cast<Marker>(value_of(kMarkers, in.attr_string_at(lg, "marker"), layer_where + " marker"));
    }
    f.layers.push_back(std::move(l));
  }
  check(f, where);
  return f;
}

/// The figures the tools drew from a file's layout before figures were declared.
std::vector<Figure> layout_figures(const ResultsReader& in) {
  std::vector<Figure> out;
  // Nadaraya-Watson kernel regression (d2l's plot_kernel_reg).
  if (in.has("predictions/x") && in.has("predictions/truth") && in.has("predictions/test") &&
      in.array("predictions/test").numel() == in.array("predictions/x").numel()) {
    Figure f;
    f.name = "kernel_regression";
    f.xlabel = "x";
    f.ylabel = "y";
    f.xlim = std::pair{0.0, 5.0};
    f.ylim = std::pair{-1.0, 5.0};
    f.layers = {{.label = "Truth", .x = "predictions/x", .y = "predictions/truth"},
                {.label = "Pred", .x = "predictions/x", .y = "predictions/test", .style = Style::dashed}};
    if (in.has("data/x_train") && in.has("data/y_train")) {
      f.layers.push_back(
          {.label = "", .x = "data/x_train", .y = "data/y_train", .style = Style::points, .marker = Marker::dot});
    }
    f.declared_by = "the file's layout (written before figures were declared)";
    out.push_back(std::move(f));
  }
  // Step-by-Step's sequence_pred picture: 2-D sequences predicted by the regression trainer.
  for (const char* split : {"test", "val"}) {
    const std::string b = fmt::format("predictions/{}", split);
    if (!in.has(b + "/prediction") || !in.has(b + "/source") || !in.has(b + "/target")) continue;
    const auto p = in.array(b + "/prediction");
    if (p.dim() != 3 || p.size(2) != 2) continue;
    Figure f;
    f.name = "predictions";
    f.kind = FigureKind::sequences;
    const auto lengths = in.has(b + "/target_lengths") ? b + "/target_lengths" : std::string();
    f.layers = {
        {.label = "Input", .data = b + "/source", .style = Style::dashed, .marker = Marker::dot},
        {.label = "Target", .data = b + "/target", .lengths = lengths, .continues = "Input", .marker = Marker::dot},
        {.label = "Predicted",
         .data = b + "/prediction",
         .lengths = lengths,
         .continues = "Input",
         .style = Style::dashed,
         .marker = Marker::cross}};
    if (in.has(b + "/directions")) {
      f.panel_labels = b + "/directions";
      f.label_names = in.has_attr("directions_values") ? in.attr_strings("directions_values")
                                                       : std::vector<std::string>{"counter-clockwise", "clockwise"};
    }
    f.outline = {{-1, -1}, {-1, 1}, {1, 1}, {1, -1}, {-1, -1}};
    f.xlim = f.ylim = std::pair{-1.6, 1.6};
    f.declared_by = "the file's layout (written before figures were declared)";
    out.push_back(std::move(f));
    break;
  }
  return out;
}

}  // namespace

const char* figure_kind_name(FigureKind kind) { return name_of(kKinds, static_cast<int>(kind)); }

void declare_figure(Results& results, Figure figure, const std::string& declared_by) {
  const std::string where = fmt::format("figure '{}' declared by {}", figure.name, declared_by);
  check(figure, where);
  figure.declared_by = declared_by;
  const std::string at = std::string(kRoot) + "/" + figure.name;
  results.remove(at);  // a figure declared again comes after the others
  const int64_t order = declaration_time();
  results.set_attr_at(at, "kind", std::string(figure_kind_name(figure.kind)));
  results.set_attr_at(at, "order", order);
  results.set_attr_at(at, "declared_by", figure.declared_by);
  const auto text = [&](const std::string& path, const char* name, const std::string& value) {
    if (!value.empty()) results.set_attr_at(path, name, value);
  };
  text(at, "title", figure.title);
  text(at, "xlabel", figure.xlabel);
  text(at, "ylabel", figure.ylabel);
  if (figure.xlim) results.set_attr_at(at, "xlim", std::vector<double>{figure.xlim->first, figure.xlim->second});
  if (figure.ylim) results.set_attr_at(at, "ylim", std::vector<double>{figure.ylim->first, figure.ylim->second});
  if (figure.kind == FigureKind::sequences) {
    results.set_attr_at(at, "panels", figure.panels);
    text(at, "panel_labels", figure.panel_labels);
    if (!figure.label_names.empty()) results.set_attr_at(at, "label_names", figure.label_names);
    if (!figure.outline.empty()) {
      std::vector<double> xy;
      for (const auto& [x, y] : figure.outline) {
        xy.push_back(x);
        xy.push_back(y);
      }
      results.set_attr_at(at, "outline", xy);
    }
  }
  text(at, "row_labels", figure.row_labels);
  text(at, "column_labels", figure.column_labels);
  for (size_t i = 0; i < figure.layers.size(); ++i) {
    const auto& l = figure.layers[i];
    const auto lg = layer_group(figure.name, i);
    results.set_attr_at(lg, "label", l.label);
    text(lg, "x", l.x);
    text(lg, "y", l.y);
    text(lg, "data", l.data);
    text(lg, "lengths", l.lengths);
    text(lg, "continues", l.continues);
    results.set_attr_at(lg, "style", std::string(name_of(kStyles, static_cast<int>(l.style))));
    results.set_attr_at(lg, "marker", std::string(name_of(kMarkers, static_cast<int>(l.marker))));
  }
}

std::vector<Figure> declared_figures(const ResultsReader& in) {
  if (!in.has(kRoot)) return layout_figures(in);
  std::vector<std::pair<int64_t, Figure>> ordered;
  for (const auto& name : in.children(kRoot)) {
    const std::string at = std::string(kRoot) + "/" + name;
    const int64_t order = in.has_attr_at(at, "order") ? static_cast<int64_t>(in.attr_double_at(at, "order")) : 0;
    ordered.emplace_back(order, read_figure(in, name));
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Figure> out;
  for (auto& [order, f] : ordered) out.push_back(std::move(f));
  return out;
}

}  // namespace attnlab::results
