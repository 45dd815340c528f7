#include "cli/report/extras.hpp"

#include <attnlab/results/reader.hpp>

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace attnlab::cli::report {
namespace {

/// Tokens up to the last one that is not "<pad>"; all of them when there are no labels.
int64_t real_length(const std::vector<std::string>& tokens, int64_t stored) {
  if (tokens.size() != static_cast<size_t>(stored)) return stored;
  int64_t n = stored;
  while (n > 1 && tokens[static_cast<size_t>(n - 1)] == "<pad>") --n;
  return n;
}

std::vector<double> values(const torch::Tensor& t) {
  auto c = t.to(torch::kDouble).contiguous().flatten();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

/// Rows of a [n, 2] tensor as points.
std::vector<std::pair<double, double>> points(const torch::Tensor& t, int64_t n) {
  std::vector<std::pair<double, double>> out;
  auto v = t.to(torch::kDouble).contiguous();
  for (int64_t i = 0; i < std::min(n, v.size(0)); ++i) out.emplace_back(v[i][0].item<double>(), v[i][1].item<double>());
  return out;
}

void read_corners(const results::ResultsReader& in, RunExtras& x) {
  for (const char* base : {"predictions/test", "predictions/val"}) {
    const std::string b = base;
    if (!in.has(b + "/prediction") || !in.has(b + "/source") || !in.has(b + "/target")) continue;
    auto pred = in.tensor(b + "/prediction"), src = in.tensor(b + "/source"), tgt = in.tensor(b + "/target");
    if (pred.dim() != 3 || pred.size(2) != 2 || src.dim() != 3 || tgt.dim() != 3) continue;
    torch::Tensor dirs = in.has(b + "/directions") ? in.tensor(b + "/directions") : torch::Tensor();
    torch::Tensor lens = in.has(b + "/target_lengths") ? in.tensor(b + "/target_lengths") : torch::Tensor();
    std::vector<std::string> names = {"Counter-Clockwise", "Clockwise"};
    if (in.has_attr("directions_values")) names = in.attr_strings("directions_values");
    x.corners_from = b;
    x.corners_total = std::min({pred.size(0), src.size(0), tgt.size(0)});
    for (int64_t i = 0; i < std::min(kCorners, x.corners_total); ++i) {
      CornerSequence s;
      if (dirs.defined() && i < dirs.numel()) {
        const auto d = static_cast<int64_t>(dirs.flatten()[i].item<double>());
        s.direction =
            d >= 0 && d < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(d)] : std::to_string(d);
      }
      const int64_t len =
          lens.defined() && i < lens.numel() ? static_cast<int64_t>(lens.flatten()[i].item<double>()) : tgt.size(1);
      s.source = points(src[i], src.size(1));
      s.target = points(tgt[i], len);
      s.prediction = points(pred[i], len);
      x.corners.push_back(std::move(s));
    }
    return;
  }
}

}  // namespace

AttentionMap make_map(const std::string& module, const results::Attention& att, int64_t max_tokens) {
  AttentionMap m;
  m.module = module;
  const auto& w = att.weights;  // [layers, heads, Q, K]
  if (w.dim() != 4) return m;
  const int64_t q = std::min(real_length(att.query_tokens, w.size(2)), max_tokens);
  const int64_t k = std::min(real_length(att.key_tokens, w.size(3)), max_tokens);
  m.layers = att.layers;
  for (int64_t l = static_cast<int64_t>(m.layers.size()); l < w.size(0); ++l) m.layers.push_back(l);
  m.layers.resize(static_cast<size_t>(w.size(0)));
  m.heads = w.size(1);
  m.queries = q;
  m.keys = k;
  if (att.query_tokens.size() == static_cast<size_t>(w.size(2))) {
    m.query_tokens.assign(att.query_tokens.begin(), att.query_tokens.begin() + q);
  }
  if (att.key_tokens.size() == static_cast<size_t>(w.size(3))) {
    m.key_tokens.assign(att.key_tokens.begin(), att.key_tokens.begin() + k);
  }
  m.query_side = att.query_side;
  m.key_side = att.key_side;
  auto kept = w.slice(2, 0, q).slice(3, 0, k).to(torch::kFloat).mul(kWeightScale).round().clamp(0, kWeightScale);
  kept = kept.to(torch::kInt).contiguous();  // [layers, heads, q, k]
  m.weights.assign(kept.data_ptr<int32_t>(), kept.data_ptr<int32_t>() + kept.numel());
  return m;
}

RunExtras read_extras(const std::string& path, int64_t max_tokens) {
  results::ResultsReader in(path, results::ReadCheck::none);
  RunExtras x;
  x.config_yaml = in.config();
  for (const char* attr : {"error", "diverged", "interrupted_during"}) {
    if (in.has_attr(attr)) x.detail = in.attr_string(attr);
  }
  for (const auto& sample : in.attention_samples()) {
    AttentionSample s{sample, {}};
    for (const auto& module : in.attention_modules(sample)) {
      const auto att = in.attention(sample, module);
      if (att.weights.dim() != 4 || att.weights.numel() == 0) continue;
      s.maps.push_back(make_map(module, att, max_tokens));
      const auto& m = s.maps.back();
      x.maps_cut += real_length(att.query_tokens, att.weights.size(2)) > m.queries ||
                    real_length(att.key_tokens, att.weights.size(3)) > m.keys;
    }
    x.attention.push_back(std::move(s));
  }
  x.samples = in.samples();
  read_corners(in, x);
  if (in.has("predictions/x") && in.has("predictions/truth") && in.has("predictions/test")) {
    KernelRegression k{values(in.tensor("predictions/x")),
                       values(in.tensor("predictions/truth")),
                       values(in.tensor("predictions/test")),
                       {},
                       {}};
    if (in.has("data/x_train") && in.has("data/y_train")) {
      k.x_train = values(in.tensor("data/x_train"));
      k.y_train = values(in.tensor("data/y_train"));
    }
    if (k.x.size() == k.prediction.size() && k.x.size() == k.truth.size()) x.kernel = std::move(k);
  }
  return x;
}

std::string subsample_attention(std::vector<RunExtras>& runs, const AttentionLimits& limits) {
  // Sample texts in recording order (the first run's order, then what later runs add).
  std::vector<std::string> order;
  std::set<std::string> seen;
  std::map<std::string, int64_t> cells;
  for (const auto& r : runs) {
    for (const auto& s : r.attention) {
      if (seen.insert(s.text).second) order.push_back(s.text);
      for (const auto& m : s.maps) cells[s.text] += m.cells();
    }
  }
  std::set<std::string> kept;
  int64_t total = 0, all = 0;
  for (const auto& text : order) {
    all += cells[text];
    if (kept.empty() || total + cells[text] <= limits.max_cells) {
      kept.insert(text);
      total += cells[text];
    }
  }
  int64_t cut = 0;
  for (auto& r : runs) {
    cut += r.maps_cut;
    std::erase_if(r.attention, [&](const AttentionSample& s) { return !kept.count(s.text); });
  }
  std::vector<std::string> notes;
  if (kept.size() < order.size()) {
    constexpr size_t kNamed = 3;  // a long run records dozens of samples: name a few of those left out
    std::vector<std::string> dropped;
    for (const auto& t : order) {
      if (!kept.count(t)) dropped.push_back(fmt::format("'{}'", t.size() > 40 ? t.substr(0, 40) + "..." : t));
    }
    const auto more = dropped.size() > kNamed ? fmt::format(" and {} more", dropped.size() - kNamed) : std::string();
    dropped.resize(std::min(dropped.size(), kNamed));
    notes.push_back(fmt::format(
        "Attention subsampled: kept the first {} of {} recorded samples (in recording order; left out: {}{}), so "
        "that the page holds at most {} weights ({} kept of {})",
        kept.size(), order.size(), fmt::join(dropped, ", "), more, limits.max_cells, total, all));
  }
  if (cut > 0) {
    notes.push_back(fmt::format("{} map(s) longer than {} tokens on an axis show their first {} tokens only", cut,
                                limits.max_tokens, limits.max_tokens));
  }
  return fmt::format("{}", fmt::join(notes, ". "));
}

}  // namespace attnlab::cli::report
