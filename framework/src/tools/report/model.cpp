#include "tools/report/model.hpp"

#include <fmt/format.h>

#include "tools/compare_tables.hpp"
#include "tools/group.hpp"
#include "tools/head_tables.hpp"
#include "tools/report/json.hpp"

namespace attnlab::tools::report {
namespace {

void write_table(JsonWriter& j, const std::string& id, const std::string& title, const Table& t) {
  j.begin_object().key("id").value(id).key("title").value(title).key("header").array(t.header);
  j.key("numeric").begin_array();
  for (size_t c = 0; c < t.header.size(); ++c) j.value(c < t.numeric.size() && t.numeric[c]);
  j.end_array().key("rows").begin_array();
  for (const auto& row : t.rows) j.array(row);
  j.end_array().end_object();
}

void write_runs(JsonWriter& j, const PageInput& in, const std::vector<std::string>& keys,
                const std::vector<Group>& groups) {
  j.key("runs").begin_array();
  for (size_t i = 0; i < in.runs.size(); ++i) {
    const auto& r = in.runs[i];
    std::string group;
    for (const auto& g : groups) {
      for (const Run* member : g.runs) {
        if (member == &r) group = g.label;
      }
    }
    j.begin_object().key("id").value(run_id(i)).key("path").value(r.path).key("experiment").value(r.experiment);
    j.key("status").value(r.status).key("detail").value(in.extras[i].detail);
    j.key("differs").value(differs_text(r, keys)).key("label").value(run_label(r, keys)).key("group").value(group);
    j.key("started").value(r.started).key("finished").value(r.finished);
    j.key("head_mask").value(in.extras[i].head_mask_text).key("heads_off").begin_object();
    for (const auto& h : in.extras[i].heads_off) {
      j.key(h.module).begin_array();
      for (const auto& [layer, head] : h.off) j.array(std::vector<int64_t>{layer, head});
      j.end_array();
    }
    j.end_object();
    j.key("config").value(in.extras[i].config_yaml).end_object();
  }
  j.end_array();
}

void write_curves(JsonWriter& j, const std::vector<Run>& runs) {
  j.key("metrics").begin_array();
  for (const auto& m : all_metrics(runs)) {
    // Step-counted runs (every run with the metric has train/step beside it) are drawn against
    // the optimizer step; per-step series (step/lr) are.
    bool by_step = !per_step(m) && m != "train/step";
    for (const auto& r : runs) {
      const auto it = r.metrics.find(m);
      if (it != r.metrics.end() && report_steps(r, it->second.size()) == nullptr) by_step = false;
    }
    j.begin_object().key("name").value(m).key("per_step").value(per_step(m) || by_step);
    j.key("higher_is_better").value(higher_is_better(m)).key("series").begin_array();
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = runs[i].metrics.find(m);
      if (it == runs[i].metrics.end()) continue;
      const auto& v = it->second;
      std::vector<int64_t> x;
      std::vector<double> y;
      for (size_t row : curve_rows(v.size())) {
        x.push_back(per_step(m) ? static_cast<int64_t>(row + 1)
                    : by_step  ? static_cast<int64_t>((*report_steps(runs[i], v.size()))[row])
                               : row_epoch(runs[i], v.size(), row));
        y.push_back(v[row]);
      }
      j.begin_object().key("run").value(i).key("x").array(x).key("y").array(y).end_object();
    }
    j.end_array().end_object();
  }
  j.end_array();
}

void write_tables(JsonWriter& j, const PageInput& in, const std::vector<std::string>& keys,
                  const std::vector<Group>& groups) {
  j.key("tables").begin_array();
  write_table(j, "runs", "Runs", runs_table(in.runs, keys));
  if (!groups.empty()) {
    write_table(j, "groups", fmt::format("Groups by {}", fmt::join(in.group_by, ", ")), groups_table(groups));
    const auto qs = quantities(in.runs, shared_metrics(in.runs), true);
    write_table(j, "grouped", grouped_heading(groups.size()), grouped_table(groups, qs));
  }
  if (const auto metrics = shared_metrics(in.runs); !metrics.empty()) {
    write_table(j, "metrics", kMetricsHeading, metrics_table(in.runs, metrics));
  }
  if (auto t = evals_table(in.runs); !t.rows.empty()) write_table(j, "evals", kEvalsHeading, t);
  if (auto t = attention_table(in.runs); !t.rows.empty()) write_table(j, "attention", kAttentionHeading, t);
  if (any_heads(in.runs)) write_table(j, "heads", kHeadsHeading, heads_table(in.runs));
  j.end_array();
}

void write_map(JsonWriter& j, const AttentionMap& m) {
  j.begin_object().key("module").value(m.module).key("layers").array(m.layers).key("heads").value(m.heads);
  j.key("queries").value(m.queries).key("keys").value(m.keys);
  j.key("query_tokens").array(m.query_tokens).key("key_tokens").array(m.key_tokens);
  j.key("query_side").value(m.query_side).key("key_side").value(m.key_side).key("w").begin_array();
  for (int32_t w : m.weights) j.value(static_cast<int64_t>(w));
  j.end_array().end_object();
}

/// Samples by text, in the order they first appear; per sample the runs that recorded it.
void write_attention(JsonWriter& j, const PageInput& in) {
  std::vector<std::string> order;
  for (const auto& x : in.extras) {
    for (const auto& s : x.attention) {
      if (std::find(order.begin(), order.end(), s.text) == order.end()) order.push_back(s.text);
    }
  }
  j.key("attention").begin_object().key("note").value(in.attention_note).key("scale").value(kWeightScale);
  j.key("samples").begin_array();
  for (const auto& text : order) {
    j.begin_object().key("text").value(text).key("runs").begin_array();
    for (size_t i = 0; i < in.extras.size(); ++i) {
      for (const auto& s : in.extras[i].attention) {
        if (s.text != text) continue;
        j.begin_object().key("run").value(i).key("maps").begin_array();
        for (const auto& m : s.maps) write_map(j, m);
        j.end_array().end_object();
      }
    }
    j.end_array().end_object();
  }
  j.end_array().end_object();
}

void write_points(JsonWriter& j, const Points& pts) {
  j.begin_array();
  for (const auto& [x, y] : pts) j.begin_array().value(x).value(y).end_array();
  j.end_array();
}

void write_range(JsonWriter& j, const char* key, const std::optional<std::pair<double, double>>& r) {
  j.key(key);
  if (r) {
    j.begin_array().value(r->first).value(r->second).end_array();
  } else {
    j.null();
  }
}

const char* style_name(results::Style s) {
  return s == results::Style::dashed ? "dashed" : s == results::Style::points ? "points" : "line";
}
const char* marker_name(results::Marker m) {
  return m == results::Marker::dot ? "dot" : m == results::Marker::cross ? "cross" : "none";
}

/// A declared figure with its data, for the page's generic drawing of its kind (page.js).
void write_figure(JsonWriter& j, size_t run, const FigureData& d) {
  const auto& f = d.spec;
  j.begin_object().key("run").value(run).key("name").value(f.name).key("kind").value(results::figure_kind_name(f.kind));
  j.key("title").value(f.title).key("xlabel").value(f.xlabel).key("ylabel").value(f.ylabel);
  write_range(j, "xlim", f.xlim);
  write_range(j, "ylim", f.ylim);
  j.key("declared_by").value(f.declared_by).key("note").value(d.note);
  j.key("panel_titles").array(d.panel_titles).key("outline");
  write_points(j, f.outline);
  j.key("row_labels").array(d.row_labels).key("column_labels").array(d.column_labels);
  j.key("layers").begin_array();
  for (const auto& l : d.layers) {
    j.begin_object().key("label").value(l.spec.label).key("style").value(style_name(l.spec.style));
    j.key("marker").value(marker_name(l.spec.marker)).key("continues").value(l.spec.continues);
    j.key("x").array(l.x).key("y").array(l.y).key("sequences").begin_array();
    for (const auto& seq : l.sequences) write_points(j, seq);
    j.end_array().key("cells").begin_array();
    for (int64_t r = 0; l.cells.dim() == 2 && r < l.cells.size(0); ++r) {
      const auto* row = &l.cells.values[static_cast<size_t>(r * l.cells.size(1))];
      j.array(std::vector<double>(row, row + l.cells.size(1)));
    }
    j.end_array().key("column").array(l.column).end_object();
  }
  j.end_array().end_object();
}

void write_outputs(JsonWriter& j, const PageInput& in) {
  j.key("translations").begin_array();
  for (size_t i = 0; i < in.extras.size(); ++i) {
    if (in.extras[i].samples.empty()) continue;
    j.begin_object().key("run").value(i).key("rows").begin_array();
    for (const auto& s : in.extras[i].samples) {
      j.begin_object().key("source").value(s.source).key("reference").value(s.reference);
      j.key("hypothesis").value(s.hypothesis).key("bleu").value(s.bleu).end_object();
    }
    j.end_array().end_object();
  }
  j.end_array().key("generations").begin_array();
  for (size_t i = 0; i < in.extras.size(); ++i) {
    for (const auto& g : in.extras[i].generations) {
      j.begin_object().key("run").value(i).key("name").value(g.name).key("prompt").value(g.prompt);
      j.key("continuation").value(g.continuation).key("how").value(g.how).end_object();
    }
  }
  j.end_array().key("figures").begin_array();
  for (size_t i = 0; i < in.extras.size(); ++i) {
    for (const auto& f : in.extras[i].figures) write_figure(j, i, f);
  }
  j.end_array().key("figure_problems").begin_array();
  for (size_t i = 0; i < in.extras.size(); ++i) {
    for (const auto& p : in.extras[i].figure_problems)
      j.begin_object().key("run").value(i).key("text").value(p).end_object();
  }
  j.end_array();
}

void write_optional(JsonWriter& j, const char* key, const std::optional<double>& v) {
  j.key(key);
  if (v) {
    j.value(*v);
  } else {
    j.null();
  }
}

/// runner ablate's /ablation/<name> and runner prune's /pruning/<name> of every run (page.js
/// draws the head grids and the pruning curves).
void write_heads(JsonWriter& j, const std::vector<Run>& runs) {
  j.key("ablations").begin_array();
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& a : runs[i].ablations) {
      j.begin_object().key("run").value(i).key("name").value(a.name).key("split").value(a.split);
      j.key("checkpoint").value(a.checkpoint).key("method").value(a.method);
      j.key("trained_head_mask").value(a.trained_head_mask);
      write_optional(j, "base_loss", a.base_loss);
      write_optional(j, "base_bleu", a.base_bleu);
      j.key("modules").array(a.modules()).key("module").array(a.module).key("layer").array(a.layer);
      j.key("head").array(a.head).key("columns").begin_object();
      for (const char* c : kAblationColumns) {
        if (const auto* v = a.column(c)) j.key(c).array(*v);
      }
      j.end_object().end_object();
    }
  }
  j.end_array().key("pruning").begin_array();
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& c : runs[i].pruning) {
      const auto band = curve_band(c.values());
      j.begin_object().key("run").value(i).key("name").value(c.name).key("split").value(c.split);
      j.key("order").value(c.order).key("reestimate").value(c.reestimate).key("repeats").value(c.repeats);
      j.key("heads_total").value(c.heads_total).key("metric").value(c.metric());
      write_optional(j, "base_loss", c.base_loss);
      write_optional(j, "base_bleu", c.base_bleu);
      write_optional(j, "within", fraction_within(c, 0.5));
      j.key("heads_off").array(c.heads_off).key("fraction").array(c.fraction);
      j.key("mean").array(band.mean).key("lo").array(band.lo).key("hi").array(band.hi).end_object();
    }
  }
  j.end_array();
}

/// /head_scores of every run: runner heads' groups and the lm trainer's scores over training
/// (page.js's part headScores, in heads.js, draws them).
void write_head_scores(JsonWriter& j, const std::vector<Run>& runs) {
  j.key("head_scores").begin_array();
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& g : runs[i].head_scores) {
      j.begin_object().key("run").value(i).key("name").value(g.name);
      write_optional(j, "step", g.step ? std::optional<double>(static_cast<double>(*g.step)) : std::nullopt);
      j.key("module").value(g.module).key("checkpoint").value(g.checkpoint).key("token_range").value(g.token_range);
      j.key("sequences").value(g.sequences).key("length").value(g.length);
      j.key("layers").value(g.layers).key("heads").value(g.heads).key("scores").begin_object();
      for (const auto& [kind, values] : g.scores) j.key(kind).array(values, 4);
      j.end_object().end_object();
    }
  }
  j.end_array();
}

/// runner rollout --write's /rollout/<sample>/<result> of every run.
void write_rollout(JsonWriter& j, const PageInput& in) {
  j.key("rollout").begin_array();
  for (size_t i = 0; i < in.extras.size(); ++i) {
    for (const auto& s : in.extras[i].rollout) {
      j.begin_object().key("run").value(i).key("text").value(s.text).key("results").begin_array();
      for (const auto& r : s.results) {
        j.begin_object().key("name").value(r.name).key("method").value(r.method).key("module").value(r.module);
        j.key("definition").value(r.definition).key("queries").value(r.queries).key("keys").value(r.keys);
        j.key("query_tokens").array(r.query_tokens).key("key_tokens").array(r.key_tokens).key("w").begin_array();
        for (int32_t w : r.weights) j.value(static_cast<int64_t>(w));
        j.end_array().end_object();
      }
      j.end_array().end_object();
    }
  }
  j.end_array();
}

}  // namespace

std::vector<size_t> curve_rows(size_t size) {
  std::vector<size_t> rows;
  const size_t stride = size <= kMaxCurvePoints ? 1 : (size + kMaxCurvePoints - 2) / (kMaxCurvePoints - 1);
  for (size_t r = 0; r < size; r += stride) rows.push_back(r);
  if (size > 0 && rows.back() != size - 1) rows.push_back(size - 1);
  return rows;
}

std::string page_data(const PageInput& in) {
  const auto keys = differing_keys(in.runs);
  const auto groups = in.group_by.empty() ? std::vector<Group>{} : group_runs(in.runs, in.group_by);
  JsonWriter j;
  j.begin_object().key("differing").array(keys).key("group_by").array(in.group_by);
  write_runs(j, in, keys, groups);
  write_curves(j, in.runs);
  write_tables(j, in, keys, groups);
  write_attention(j, in);
  write_outputs(j, in);
  write_heads(j, in.runs);
  write_head_scores(j, in.runs);
  write_rollout(j, in);
  j.end_object();
  return j.str();
}

}  // namespace attnlab::tools::report
