#include "tools/head_tables.hpp"

#include "tools/compare_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace attnlab::tools {
namespace {

const HeadAblation* find_ablation(const Run& r, const std::string& name) {
  for (const auto& a : r.ablations) {
    if (a.name == name) return &a;
  }
  return nullptr;
}
const PruningCurve* find_pruning(const Run& r, const std::string& name) {
  for (const auto& c : r.pruning) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

/// The extreme finite value of a column (largest or smallest); nullopt without one.
std::optional<double> extreme(const HeadAblation* a, const char* column, bool largest) {
  const auto* v = a ? a->column(column) : nullptr;
  if (v == nullptr) return std::nullopt;
  std::optional<double> best;
  for (double x : *v) {
    if (std::isfinite(x) && (!best || (largest ? x > *best : x < *best))) best = x;
  }
  return best;
}

std::string cell(double v, const std::string& value) {
  if (value.starts_with("heads_")) return fmt::format("{:.0f}", v);
  if (value.starts_with("max_fraction")) return fmt::format("{:.3f}", v);
  return fmt::format("{:+.4g}", v).substr(value.starts_with("base_") ? 1 : 0);
}

}  // namespace

bool any_heads(const std::vector<Run>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const Run& r) { return !r.ablations.empty() || !r.pruning.empty(); });
}

std::vector<Quantity> head_quantities(const std::vector<Run>& runs) {
  std::set<std::string> ablations, pruning;
  for (const auto& r : runs) {
    for (const auto& a : r.ablations) ablations.insert(a.name);
    for (const auto& c : r.pruning) pruning.insert(c.name);
  }
  std::vector<Quantity> all;
  for (const auto& n : ablations) {
    auto abl = [n](const Run& r) { return find_ablation(r, n); };
    all.push_back({"ablation", n, "base_loss", [abl](const Run& r) {
                     const auto* a = abl(r);
                     return a ? a->base_loss : std::nullopt;
                   }});
    all.push_back({"ablation", n, "max_delta_loss", [abl](const Run& r) { return extreme(abl(r), "delta_loss", true); }});
    all.push_back({"ablation", n, "base_bleu", [abl](const Run& r) {
                     const auto* a = abl(r);
                     return a ? a->base_bleu : std::nullopt;
                   }});
    all.push_back({"ablation", n, "min_delta_bleu", [abl](const Run& r) { return extreme(abl(r), "delta_bleu", false); }});
    all.push_back({"ablation", n, "heads_abs_delta_bleu_over_0.5", [abl](const Run& r) -> std::optional<double> {
                     const auto* a = abl(r);
                     const auto m = a ? bleu_moves(*a, 0.5) : std::nullopt;
                     if (!m) return std::nullopt;
                     return static_cast<double>(m->lower + m->raise);
                   }});
  }
  for (const auto& n : pruning) {
    auto pr = [n](const Run& r) { return find_pruning(r, n); };
    all.push_back({"pruning", n, "base_loss", [pr](const Run& r) {
                     const auto* c = pr(r);
                     return c ? c->base_loss : std::nullopt;
                   }});
    all.push_back({"pruning", n, "base_bleu", [pr](const Run& r) {
                     const auto* c = pr(r);
                     return c ? c->base_bleu : std::nullopt;
                   }});
    all.push_back({"pruning", n, "max_fraction_within_0.5_bleu", [pr](const Run& r) {
                     const auto* c = pr(r);
                     return c ? fraction_within(*c, 0.5) : std::nullopt;
                   }});
  }
  std::vector<Quantity> kept;  // only what some run has
  for (auto& q : all) {
    if (std::any_of(runs.begin(), runs.end(), [&](const Run& r) { return q.of(r).has_value(); })) kept.push_back(q);
  }
  return kept;
}

std::string head_quantity_name(const Quantity& q) { return q.section + "/" + q.name + "/" + q.value; }

Table heads_table(const std::vector<Run>& runs) {
  Table t{{"quantity", "split"}, {}, {false, false}};
  for (size_t i = 0; i < runs.size(); ++i) {
    t.header.push_back(run_id(i));
    t.numeric.push_back(true);
  }
  for (const auto& q : head_quantities(runs)) {
    std::set<std::string> splits;
    std::vector<std::string> row{head_quantity_name(q), ""};
    for (const auto& r : runs) {
      const auto v = q.of(r);
      std::string text = v ? cell(*v, q.value) : "-";
      if (q.section == "ablation") {
        const auto* a = find_ablation(r, q.name);
        if (a) splits.insert(a->split);
        if (a && v && q.value == "max_delta_loss") {
          if (const auto row_at = most_harmful(*a)) {
            text += fmt::format(" ({} {}.{})", a->module[*row_at], a->layer[*row_at], a->head[*row_at]);
          }
        }
        if (a && v && q.value.starts_with("heads_")) {
          const auto m = bleu_moves(*a, 0.5);
          text += fmt::format(" ({} lower, {} raise)", m->lower, m->raise);
        }
      } else if (const auto* c = find_pruning(r, q.name)) {
        splits.insert(c->split);
      }
      row.push_back(text);
    }
    std::vector<std::string> s(splits.begin(), splits.end());
    row[1] = fmt::format("{}", fmt::join(s, ", "));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table top_heads_table(const HeadAblation& a, size_t k) {
  Table t{{"rank", "module", "layer", "head"}, {}, {true, false, true, true}};
  std::vector<std::string> columns;
  for (const char* c : {"delta_loss", "delta_bleu", "importance_normalized"}) {
    if (a.column(c)) {
      columns.push_back(c);
      t.header.push_back(c);
      t.numeric.push_back(true);
    }
  }
  size_t rank = 0;
  for (size_t row : top_heads(a, k)) {
    std::vector<std::string> r{std::to_string(++rank), a.module[row], std::to_string(a.layer[row]),
                               std::to_string(a.head[row])};
    for (const auto& c : columns) {
      const double v = (*a.column(c))[row];
      r.push_back(std::isnan(v)                    ? std::string("off in training")
                  : c == "importance_normalized" ? fmt::format("{:.4f}", v)
                  : c == "delta_bleu"            ? fmt::format("{:+.2f}", v)
                                                 : fmt::format("{:+.4f}", v));
    }
    t.rows.push_back(std::move(r));
  }
  return t;
}

std::string top_heads_heading(const std::string& run, const HeadAblation& a, size_t k) {
  std::string base;
  if (a.base_loss) base += fmt::format("; base loss {:.4f}", *a.base_loss);
  if (a.base_bleu) base += fmt::format(", base BLEU {:.2f}", *a.base_bleu);
  const bool all = k == 0 || k >= a.rows();
  return fmt::format("{} heads of {} by {}: ablation '{}' (split {}, checkpoint {}{})",
                     all ? std::string("All") : fmt::format("Top {}", k), run,
                     a.column("delta_loss") ? "delta loss" : "normalised gradient importance", a.name, a.split, a.checkpoint, base);
}

}  // namespace attnlab::tools
