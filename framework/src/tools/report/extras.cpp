#include "tools/report/extras.hpp"

#include "results/hdf5.hpp"

#include <attnlab/results/figure.hpp>
#include <attnlab/results/reader.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace attnlab::tools::report {
namespace {

/// A weight as 0..kWeightScale: weight * kWeightScale rounded half to even (as torch.round),
/// clamped; NaN as 0 (the page draws no weight there).
int32_t quantise(float w) {
  const float scaled = std::nearbyint(w * static_cast<float>(kWeightScale));
  if (std::isnan(scaled)) return 0;
  return static_cast<int32_t>(std::clamp(scaled, 0.0f, static_cast<float>(kWeightScale)));
}

/// Tokens up to the last one that is not "<pad>"; all of them when there are no labels.
int64_t real_length(const std::vector<std::string>& tokens, int64_t stored) {
  if (tokens.size() != static_cast<size_t>(stored)) return stored;
  int64_t n = stored;
  while (n > 1 && tokens[static_cast<size_t>(n - 1)] == "<pad>") --n;
  return n;
}

/// /rollout/<sample>/<result>: trailing <pad> cut and at most max_tokens per axis, as attention.
RolloutMap rollout_map(const results::ResultsReader& in, const std::string& at, const std::string& name,
                       int64_t max_tokens) {
  const auto a = in.array(at);  // [queries, keys]
  ATTNLAB_CHECK(a.dim() == 2, Error, "{}: /{} should be [queries, keys] but has {} dimensions", in.path(), at, a.dim());
  RolloutMap m;
  m.name = name;
  for (auto [field, attr] : {std::pair{&m.method, "method"}, {&m.module, "module"}, {&m.definition, "definition"}}) {
    if (in.has_attr_at(at, attr)) *field = in.attr_string_at(at, attr);
  }
  auto tokens = [&](const char* attr) {
    return in.has_attr_at(at, attr) ? in.attr_strings_at(at, attr) : std::vector<std::string>{};
  };
  auto q_tokens = tokens("query_tokens"), k_tokens = tokens("key_tokens");
  m.queries = std::min(real_length(q_tokens, a.size(0)), max_tokens);
  m.keys = std::min(real_length(k_tokens, a.size(1)), max_tokens);
  if (q_tokens.size() == static_cast<size_t>(a.size(0))) m.query_tokens.assign(q_tokens.begin(), q_tokens.begin() + m.queries);
  if (k_tokens.size() == static_cast<size_t>(a.size(1))) m.key_tokens.assign(k_tokens.begin(), k_tokens.begin() + m.keys);
  for (int64_t q = 0; q < m.queries; ++q) {
    for (int64_t k = 0; k < m.keys; ++k) m.weights.push_back(quantise(a.at({q, k})));
  }
  return m;
}

/// /attention/<sample>/<module> as ResultsReader::attention reads it, but only the corner the page
/// shows is read from the file (a hyperslab through `file`, a second read-only handle): the query
/// and key axes up to their last token that is not "<pad>" and at most max_tokens, every layer and
/// head. real_queries / real_keys: the lengths without trailing "<pad>", before the max_tokens cut.
results::Attention attention_crop(const results::ResultsReader& in, hid_t file, const std::string& sample,
                                  const std::string& module, int64_t max_tokens, int64_t& real_queries,
                                  int64_t& real_keys) {
  namespace h5 = results::h5;
  const std::string at = "/attention/" + h5::link_name(sample) + "/" + h5::link_name(module);
  const auto dims = h5::dataset_dims(file, at, in.path());
  ATTNLAB_CHECK(dims.size() == 4, ResultsError, "results file {}: {} should be [layers, heads, queries, keys], found {}-D",
                in.path(), at, dims.size());
  results::Attention att;
  auto tokens = [&](const char* name) {
    return in.has_attr_at(at, name) ? in.attr_strings_at(at, name) : std::vector<std::string>{};
  };
  const auto q_tokens = tokens("query_tokens"), k_tokens = tokens("key_tokens");
  real_queries = real_length(q_tokens, dims[2]);
  real_keys = real_length(k_tokens, dims[3]);
  const int64_t q = std::min(real_queries, max_tokens), k = std::min(real_keys, max_tokens);
  att.weights = h5::read_float_block(file, at, {0, 0, 0, 0}, {dims[0], dims[1], q, k}, in.path());
  if (q_tokens.size() == static_cast<size_t>(dims[2])) att.query_tokens.assign(q_tokens.begin(), q_tokens.begin() + q);
  if (k_tokens.size() == static_cast<size_t>(dims[3])) att.key_tokens.assign(k_tokens.begin(), k_tokens.begin() + k);
  if (in.has_attr_at(at, "layers")) {
    for (double l : in.attr_doubles_at(at, "layers")) att.layers.push_back(static_cast<int64_t>(l));
  } else {
    for (int64_t l = 0; l < dims[0]; ++l) att.layers.push_back(l);
  }
  ATTNLAB_CHECK(static_cast<int64_t>(att.layers.size()) == dims[0], ResultsError,
                "results file {}: {} has {} layers but its attribute 'layers' names {}", in.path(), at, dims[0],
                att.layers.size());
  if (in.has_attr_at(at, "query_side")) att.query_side = in.attr_string_at(at, "query_side");
  if (in.has_attr_at(at, "key_side")) att.key_side = in.attr_string_at(at, "key_side");
  return att;
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
  m.weights.reserve(static_cast<size_t>(w.size(0) * w.size(1) * q * k));  // [layers, heads, q, k]
  for (int64_t l = 0; l < w.size(0); ++l) {
    for (int64_t h = 0; h < w.size(1); ++h) {
      for (int64_t qi = 0; qi < q; ++qi) {
        for (int64_t ki = 0; ki < k; ++ki) m.weights.push_back(quantise(w.at({l, h, qi, ki})));
      }
    }
  }
  return m;
}

RunExtras read_extras(const std::string& path, int64_t max_tokens) {
  results::ResultsReader in(path, results::ReadCheck::none);
  RunExtras x;
  x.config_yaml = in.config();
  for (const char* attr : {"error", "diverged", "interrupted_during"}) {
    if (in.has_attr(attr)) x.detail = in.attr_string(attr);
  }
  const auto samples = in.attention_samples();
  results::h5::Handle file;  // a second read-only handle, for reading only the crops of the attention maps
  if (!samples.empty()) {
    file = results::h5::check(results::h5::open_read_only(path, false), path, "cannot open the file for reading");
  }
  for (const auto& sample : samples) {
    AttentionSample s{sample, {}};
    for (const auto& module : in.attention_modules(sample)) {
      int64_t real_queries = 0, real_keys = 0;
      const auto att = attention_crop(in, file.get(), sample, module, max_tokens, real_queries, real_keys);
      if (att.weights.dim() != 4 || att.weights.numel() == 0) continue;
      s.maps.push_back(make_map(module, att, max_tokens));
      const auto& m = s.maps.back();
      x.maps_cut += real_queries > m.queries || real_keys > m.keys;
    }
    x.attention.push_back(std::move(s));
  }
  x.samples = in.samples();
  for (const auto& name : in.children("generations")) {
    const std::string at = "generations/" + name;
    const auto text = [&](const char* a) { return in.has_attr_at(at, a) ? in.attr_string_at(at, a) : std::string(); };
    const auto number = [&](const char* a) { return in.has_attr_at(at, a) ? in.attr_double_at(at, a) : 0.0; };
    if (!in.has_attr_at(at, "prompt") || !in.has_attr_at(at, "continuation")) continue;  // not a generation
    std::string how = text("decoding");
    if (how == "sampled") {
      how += fmt::format(" (temperature {:g}", number("temperature"));
      if (number("top_k") > 0) how += fmt::format(", top-k {:g}", number("top_k"));
      if (number("top_p") < 1) how += fmt::format(", top-p {:g}", number("top_p"));
      how += fmt::format(", seed {:g})", number("seed"));
    }
    how += fmt::format(", {:g} tokens", number("tokens"));
    if (const auto ckpt = text("checkpoint"); !ckpt.empty()) how += fmt::format(", {} checkpoint", ckpt);
    x.generations.push_back({name, text("prompt"), text("continuation"), how});
  }
  for (const auto& group : in.children("rollout")) {
    const std::string at = "rollout/" + group;
    RolloutSample s{in.has_attr_at(at, "text") ? in.attr_string_at(at, "text") : group, {}};
    for (const auto& name : in.children(at)) s.results.push_back(rollout_map(in, at + "/" + name, name, max_tokens));
    if (!s.results.empty()) x.rollout.push_back(std::move(s));
  }
  if (in.has("interventions/head_mask")) {
    const std::string at = "interventions/head_mask";
    if (in.has_attr_at(at, "text")) x.head_mask_text = in.attr_string_at(at, "text");
    for (const auto& module : in.children(at)) {
      const auto xi = in.array(at + "/" + module);  // [layers, heads]
      if (xi.shape.size() != 2) continue;
      HeadsOff h{module, {}};
      for (int64_t l = 0; l < xi.shape[0]; ++l) {
        for (int64_t k = 0; k < xi.shape[1]; ++k) {
          if (xi.values[static_cast<size_t>(l * xi.shape[1] + k)] == 0.0f) h.off.emplace_back(l, k);
        }
      }
      if (!h.off.empty()) x.heads_off.push_back(std::move(h));
    }
  }
  for (const auto& f : results::declared_figures(in)) {
    try {
      x.figures.push_back(read_figure_data(in, f, kPageFigureLimits));
    } catch (const Error& e) {
      x.figure_problems.push_back(e.what());
    }
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

}  // namespace attnlab::tools::report
