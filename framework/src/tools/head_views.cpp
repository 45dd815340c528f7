#include "tools/head_views.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace attnlab::tools {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string optional_string(const results::ResultsReader& in, const std::string& at, const char* name) {
  return in.has_attr_at(at, name) ? in.attr_string_at(at, name) : std::string();
}
std::optional<double> optional_number(const results::ResultsReader& in, const std::string& at, const char* name) {
  if (!in.has_attr_at(at, name)) return std::nullopt;
  return in.attr_double_at(at, name);
}

/// A 1-D dataset of `n` values (n < 0: any length) as doubles.
std::vector<double> vector_at(const results::ResultsReader& in, const std::string& at, int64_t n) {
  const auto a = in.array(at);
  ATTNLAB_CHECK(a.dim() == 1 && (n < 0 || a.size(0) == n), Error, "{}: /{} should be [{}] but is [{}]", in.path(), at,
                n < 0 ? std::string("n") : std::to_string(n), fmt::join(a.shape, ", "));
  return {a.values.begin(), a.values.end()};
}
std::vector<int64_t> ints_at(const results::ResultsReader& in, const std::string& at, int64_t n) {
  std::vector<int64_t> out;
  for (double v : vector_at(in, at, n)) out.push_back(static_cast<int64_t>(std::llround(v)));
  return out;
}
/// A [repeats, points] dataset as rows.
std::vector<std::vector<double>> matrix_at(const results::ResultsReader& in, const std::string& at, int64_t points) {
  const auto a = in.array(at);
  if (a.dim() == 1 && a.size(0) == points) return {std::vector<double>(a.values.begin(), a.values.end())};
  ATTNLAB_CHECK(a.dim() == 2 && a.size(1) == points, Error, "{}: /{} should be [repeats, {}] but is [{}]", in.path(),
                at, points, fmt::join(a.shape, ", "));
  std::vector<std::vector<double>> rows;
  for (int64_t r = 0; r < a.size(0); ++r) {
    const auto* p = &a.values[static_cast<size_t>(r * points)];
    rows.emplace_back(p, p + points);
  }
  return rows;
}

}  // namespace

const std::vector<double>* HeadAblation::column(const std::string& c) const {
  auto it = values.find(c);
  return it == values.end() ? nullptr : &it->second;
}

std::vector<std::string> HeadAblation::modules() const {
  std::vector<std::string> out;
  for (const auto& m : module) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}

std::vector<HeadAblation> read_ablations(const results::ResultsReader& in) {
  std::vector<HeadAblation> out;
  for (const auto& name : in.children("ablation")) {
    const std::string at = "ablation/" + name;
    if (!in.has(at + "/module")) continue;  // not an ablation group
    HeadAblation a;
    a.name = name;
    a.split = optional_string(in, at, "split");
    a.checkpoint = optional_string(in, at, "checkpoint");
    a.method = optional_string(in, at, "method");
    a.trained_head_mask = optional_string(in, at, "trained_head_mask");
    a.base_loss = optional_number(in, at, "base_loss");
    a.base_bleu = optional_number(in, at, "base_bleu");
    a.module = in.strings(at + "/module");
    const auto n = static_cast<int64_t>(a.module.size());
    a.layer = ints_at(in, at + "/layer", n);
    a.head = ints_at(in, at + "/head", n);
    for (const char* c : kAblationColumns) {
      if (in.has(at + "/" + c)) a.values[c] = vector_at(in, at + "/" + c, n);
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

HeadScoreGrid read_grid(const results::ResultsReader& in, const std::string& at, const std::string& name) {
  HeadScoreGrid g;
  g.name = name;
  g.module = optional_string(in, at, "module");
  g.checkpoint = optional_string(in, at, "checkpoint");
  g.token_range = optional_string(in, at, "token_range");
  g.sequences = static_cast<int64_t>(optional_number(in, at, "sequences").value_or(0));
  g.length = static_cast<int64_t>(optional_number(in, at, "length").value_or(0));
  if (const auto step = optional_number(in, at, "step")) g.step = static_cast<int64_t>(std::llround(*step));
  for (const char* kind : kHeadScoreKinds) {
    const auto path = at + "/" + kind;
    if (!in.has(path)) continue;
    const auto a = in.array(path);
    ATTNLAB_CHECK(a.dim() == 2 && (g.scores.empty() || (a.size(0) == g.layers && a.size(1) == g.heads)), Error,
                  "{}: /{} should be [layers, heads]{} but is [{}]", in.path(), path,
                  g.scores.empty() ? std::string() : fmt::format(" = [{}, {}]", g.layers, g.heads),
                  fmt::join(a.shape, ", "));
    g.layers = a.size(0);
    g.heads = a.size(1);
    g.scores[kind] = std::vector<double>(a.values.begin(), a.values.end());
  }
  return g;
}

}  // namespace

std::vector<HeadScoreGrid> read_head_scores(const results::ResultsReader& in) {
  std::vector<HeadScoreGrid> out;
  for (const auto& name : in.children("head_scores")) {
    const std::string at = "head_scores/" + name;
    if (name == "training") {
      std::vector<HeadScoreGrid> points;
      for (const auto& point : in.children(at)) {
        auto g = read_grid(in, at + "/" + point, name);
        if (g.step && !g.scores.empty()) points.push_back(std::move(g));
      }
      std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return *a.step < *b.step; });
      for (auto& g : points) out.push_back(std::move(g));
      continue;
    }
    auto g = read_grid(in, at, name);
    if (!g.scores.empty()) out.push_back(std::move(g));
  }
  return out;
}

std::vector<PruningCurve> read_pruning(const results::ResultsReader& in) {
  std::vector<PruningCurve> out;
  for (const auto& name : in.children("pruning")) {
    const std::string at = "pruning/" + name;
    if (!in.has(at + "/heads_off")) continue;  // not a pruning group
    PruningCurve c;
    c.name = name;
    c.split = optional_string(in, at, "split");
    c.order = optional_string(in, at, "order");
    c.reestimate = optional_number(in, at, "reestimate").value_or(0) != 0;
    c.repeats = static_cast<int64_t>(optional_number(in, at, "repeats").value_or(1));
    c.base_loss = optional_number(in, at, "base_loss");
    c.base_bleu = optional_number(in, at, "base_bleu");
    c.heads_off = ints_at(in, at + "/heads_off", -1);
    const auto points = static_cast<int64_t>(c.heads_off.size());
    c.heads_total = static_cast<int64_t>(optional_number(in, at, "heads_total").value_or(0));
    if (in.has(at + "/fraction")) {
      c.fraction = vector_at(in, at + "/fraction", points);
    } else {
      for (int64_t h : c.heads_off)
        c.fraction.push_back(c.heads_total > 0 ? static_cast<double>(h) / static_cast<double>(c.heads_total) : kNaN);
    }
    if (in.has(at + "/loss")) c.loss = matrix_at(in, at + "/loss", points);
    if (in.has(at + "/bleu")) c.bleu = matrix_at(in, at + "/bleu", points);
    ATTNLAB_CHECK(!c.loss.empty() || !c.bleu.empty(), Error, "{}: /{} holds neither loss nor bleu", in.path(), at);
    out.push_back(std::move(c));
  }
  return out;
}

CurveBand curve_band(const std::vector<std::vector<double>>& repeats) {
  CurveBand b;
  const size_t points = repeats.empty() ? 0 : repeats.front().size();
  for (size_t p = 0; p < points; ++p) {
    double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
    int n = 0;
    for (const auto& r : repeats) {
      if (p >= r.size() || !std::isfinite(r[p])) continue;
      sum += r[p];
      lo = std::min(lo, r[p]);
      hi = std::max(hi, r[p]);
      ++n;
    }
    b.mean.push_back(n ? sum / n : kNaN);
    b.lo.push_back(n ? lo : kNaN);
    b.hi.push_back(n ? hi : kNaN);
  }
  return b;
}

std::optional<size_t> most_harmful(const HeadAblation& a) {
  const auto* d = a.column("delta_loss");
  if (d == nullptr) return std::nullopt;
  const auto top = top_heads(a, 1);
  if (top.empty() || !std::isfinite((*d)[top.front()])) return std::nullopt;
  return top.front();
}

std::vector<size_t> top_heads(const HeadAblation& a, size_t k) {
  const auto* d = a.column("delta_loss") ? a.column("delta_loss") : a.column("importance_normalized");
  if (d == nullptr) return {};
  std::vector<size_t> rows(a.rows());
  std::iota(rows.begin(), rows.end(), size_t{0});
  std::stable_sort(rows.begin(), rows.end(), [&](size_t x, size_t y) {
    const double vx = (*d)[x], vy = (*d)[y];
    if (std::isnan(vx) != std::isnan(vy)) return std::isnan(vy);
    return vx > vy;
  });
  if (k > 0 && rows.size() > k) rows.resize(k);
  return rows;
}

std::optional<BleuMoves> bleu_moves(const HeadAblation& a, double threshold) {
  const auto* d = a.column("delta_bleu");
  if (d == nullptr) return std::nullopt;
  BleuMoves m;
  for (double v : *d) {
    m.lower += v < -threshold;
    m.raise += v > threshold;
  }
  return m;
}

std::optional<double> fraction_within(const PruningCurve& c, double tolerance) {
  if (c.bleu.empty() || !c.base_bleu) return std::nullopt;
  const auto band = curve_band(c.bleu);
  double best = 0;
  for (size_t p = 0; p < band.mean.size() && p < c.fraction.size(); ++p) {
    if (!(band.mean[p] >= *c.base_bleu - tolerance)) break;
    best = std::max(best, c.fraction[p]);
  }
  return best;
}

std::string head_name(const HeadAblation& a, size_t row) {
  return fmt::format("{} layer {} head {}", a.module[row], a.layer[row], a.head[row]);
}

}  // namespace attnlab::tools
