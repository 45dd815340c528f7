#include "tools/group.hpp"

#include "tools/head_tables.hpp"

#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "tools/stats.hpp"

namespace attnlab::tools {
namespace {

std::vector<double> values_of(const Group& g, const Quantity& q) {
  std::vector<double> out;
  for (const Run* r : g.runs) {
    if (auto v = q.of(*r); v && std::isfinite(*v)) out.push_back(*v);
  }
  return out;
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.4g}", v) : "-"; }
std::string full(double v) { return std::isfinite(v) ? fmt::format("{:.17g}", v) : (std::isnan(v) ? "nan" : "inf"); }

std::string cell(const stats::Describe& d, size_t group_size) {
  if (d.n == 0) return "-";
  std::string s =
      d.n < 2 ? num(d.mean) : fmt::format("{} ± {} [{}, {}]", num(d.mean), num(d.sd), num(d.min), num(d.max));
  if (d.n != group_size) s += fmt::format(" (n={})", d.n);
  return s;
}

std::string p_text(double p) {
  if (!std::isfinite(p)) return "-";
  return p < 1e-4 ? fmt::format("{:.1e}", p) : fmt::format("{:.4f}", p);
}

}  // namespace

std::vector<Group> group_runs(const std::vector<Run>& runs, const std::vector<std::string>& keys) {
  ATTNLAB_CHECK(!keys.empty(), Error, "--group-by: expected config keys such as model.norm");
  std::set<std::string> all_keys;
  for (const auto& r : runs) {
    for (const auto& [k, v] : r.config) all_keys.insert(k);
  }
  for (const auto& k : keys) {
    if (all_keys.count(k)) continue;
    const auto hint = config::did_you_mean(k, {all_keys.begin(), all_keys.end()});
    throw Error(fmt::format("--group-by: '{}' is in no run's config{}", k,
                            hint ? fmt::format("; did you mean '{}'?", *hint) : std::string()));
  }
  std::map<std::vector<std::string>, Group> by_values;
  for (const auto& r : runs) {
    std::vector<std::string> values;
    for (const auto& k : keys) {
      auto it = r.config.find(k);
      values.push_back(it == r.config.end() ? "(unset)" : it->second);
    }
    auto& g = by_values[values];
    g.values = values;
    g.runs.push_back(&r);
  }
  std::vector<Group> out;
  for (auto& [values, g] : by_values) {
    for (size_t i = 0; i < keys.size(); ++i) g.label += fmt::format("{}{}={}", i ? ", " : "", keys[i], values[i]);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<Quantity> quantities(const std::vector<Run>& runs, const std::vector<std::string>& metrics,
                                 bool attention, bool heads) {
  std::vector<Quantity> qs;
  for (const auto& m : metrics) {
    qs.push_back({"metric", m, "final", [m](const Run& r) -> std::optional<double> {
                    auto s = summarize(r, m);
                    return s.valid ? std::optional(s.final_value) : std::nullopt;
                  }});
    qs.push_back(
        {"metric", m, higher_is_better(m) ? "best (max)" : "best (min)", [m](const Run& r) -> std::optional<double> {
           auto s = summarize(r, m);
           return s.valid ? std::optional(s.best) : std::nullopt;
         }});
  }
  for (const auto& name : eval_names(runs)) {
    for (const bool d2l : {false, true}) {
      qs.push_back(
          {"eval", name, d2l ? "d2l_mean_bleu" : "sacrebleu", [name, d2l](const Run& r) -> std::optional<double> {
             auto it = r.evals.find(name);
             if (it == r.evals.end()) return std::nullopt;
             return d2l ? it->second.d2l_mean_bleu : it->second.bleu;
           }});
    }
    // Lowercased sacreBLEU, when some run's file has it (runner eval stores it since issue 17).
    const bool lowercase = std::any_of(runs.begin(), runs.end(), [&name](const Run& r) {
      auto it = r.evals.find(name);
      return it != r.evals.end() && it->second.bleu_lowercase.has_value();
    });
    if (lowercase) {
      qs.push_back({"eval", name, "sacrebleu_lowercase", [name](const Run& r) -> std::optional<double> {
                      auto it = r.evals.find(name);
                      return it == r.evals.end() ? std::nullopt : it->second.bleu_lowercase;
                    }});
    }
  }
  if (any_samples(runs)) {
    qs.push_back({"samples", "sentence BLEU", "mean", [](const Run& r) { return r.samples_mean_bleu; }});
  }
  if (heads) {
    for (auto& q : head_quantities(runs)) qs.push_back(std::move(q));
  }
  if (!attention) return qs;
  for (const auto& [m, layers] : union_of_heads(runs)) {
    for (const auto& [l, heads] : layers) {
      for (const auto& [h, unused] : heads) {
        const auto name = fmt::format("{} layer {} head {}", m, l + 1, h + 1);
        for (const bool peak : {false, true}) {
          qs.push_back({"attention", name, peak ? "max_weight" : "entropy",
                        [m, l, h, peak](const Run& r) -> std::optional<double> {
                          const HeadStats* s = find_head(r, m, l, h);
                          if (s == nullptr) return std::nullopt;
                          return peak ? s->max_weight : s->entropy;
                        }});
        }
      }
    }
  }
  return qs;
}

Table grouped_table(const std::vector<Group>& groups, const std::vector<Quantity>& qs) {
  Table t{{"quantity", "value"}, {}, {false, false}};
  for (const auto& g : groups) {
    t.header.push_back(fmt::format("{} (n={})", g.label, g.runs.size()));
    t.numeric.push_back(true);
  }
  const bool two = groups.size() == 2;
  if (two) {
    for (const char* h : {"p (Welch)", "Hedges' g"}) {
      t.header.push_back(h);
      t.numeric.push_back(true);
    }
  }
  std::string last;
  for (const auto& q : qs) {
    const auto name = q.section == "metric" ? q.name : q.section + " " + q.name;
    std::vector<std::string> row{name == last ? "" : name, q.value};
    last = name;
    std::vector<std::vector<double>> samples;
    for (const auto& g : groups) {
      samples.push_back(values_of(g, q));
      row.push_back(cell(stats::describe(samples.back()), g.runs.size()));
    }
    if (two) {
      row.push_back(p_text(stats::welch_t_test(samples[0], samples[1]).p));
      row.push_back(num(stats::hedges_g(samples[0], samples[1])));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table grouped_csv(const std::vector<Group>& groups, const std::vector<Quantity>& qs,
                  const std::vector<std::string>& keys) {
  Table t{keys, {}, {}};
  for (const char* h :
       {"section", "quantity", "value", "n", "mean", "sd", "min", "max", "t", "df", "p_welch", "hedges_g"}) {
    t.header.push_back(h);
  }
  for (const auto& q : qs) {
    std::vector<std::vector<double>> samples;
    for (const auto& g : groups) samples.push_back(values_of(g, q));
    stats::Welch w{NAN, NAN, NAN};
    double g_eff = NAN;
    if (groups.size() == 2) {
      w = stats::welch_t_test(samples[0], samples[1]);
      g_eff = stats::hedges_g(samples[0], samples[1]);
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      const auto d = stats::describe(samples[i]);
      std::vector<std::string> row = groups[i].values;
      for (auto v :
           {q.section, q.name, q.value, std::to_string(d.n), full(d.mean), full(d.sd), full(d.min), full(d.max)}) {
        row.push_back(v);
      }
      for (double v : {w.t, w.df, w.p, g_eff}) row.push_back(groups.size() == 2 ? full(v) : "");
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

Table groups_table(const std::vector<Group>& groups) {
  Table t{{"group", "n", "files"}, {}, {false, true, false}};
  for (const auto& g : groups) {
    std::string files;  // the first few: a seed sweep's group holds dozens (compare without --group-by lists all)
    constexpr size_t kShown = 3;
    for (size_t i = 0; i < g.runs.size() && i < kShown; ++i) {
      files += (files.empty() ? "" : " ") + std::filesystem::path(g.runs[i]->path).filename().string();
    }
    if (g.runs.size() > kShown) files += fmt::format(" +{} more", g.runs.size() - kShown);
    t.rows.push_back({g.label, std::to_string(g.runs.size()), files});
  }
  return t;
}

}  // namespace attnlab::tools
