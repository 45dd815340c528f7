// `runner compare A.h5 B.h5 [...]`: runs side by side from their results files; with --group-by,
// groups of runs side by side (group.cpp).
#include "tools/commands.hpp"
#include "tools/compare_tables.hpp"
#include "tools/group.hpp"
#include "tools/head_tables.hpp"
#include "tools/plot/figures.hpp"
#include "tools/runs.hpp"
#include "tools/table.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

namespace attnlab::tools {
namespace {

/// Everything in one row per run (for spreadsheets and scripts).
Table csv_table(const std::vector<Run>& runs, const std::vector<std::string>& keys,
                const std::vector<std::string>& metrics, bool heads) {
  Table t{{"run", "file", "experiment", "status", "differs", "num_parameters", "wall_seconds"}, {}, {}};
  for (const auto& m : metrics) {
    for (const char* suffix : {"final", "final_epoch", "best", "best_epoch"}) t.header.push_back(m + " " + suffix);
  }
  const auto evals = eval_names(runs);
  for (const auto& e : evals) {
    t.header.push_back("eval " + e + " bleu");
    t.header.push_back("eval " + e + " bleu_lowercase");
    t.header.push_back("eval " + e + " d2l_mean_bleu");
  }
  const bool samples = any_samples(runs);
  if (samples) t.header.push_back("samples mean sentence bleu");
  const AttentionStats all = union_of_heads(runs);
  for (const auto& [m, layers] : all) {
    for (const auto& [l, heads] : layers) {
      for (const auto& [h, s] : heads) {
        t.header.push_back(fmt::format("attention {} layer {} head {} entropy", m, l + 1, h + 1));
        t.header.push_back(fmt::format("attention {} layer {} head {} max_weight", m, l + 1, h + 1));
      }
    }
  }
  // runner ablate / prune summaries last, so that the columns before them keep their places.
  const auto head_qs = heads ? head_quantities(runs) : std::vector<Quantity>{};
  for (const auto& q : head_qs) t.header.push_back(head_quantity_name(q));
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::vector<std::string> row{run_id(i),
                                 r.path,
                                 r.experiment,
                                 r.status,
                                 differs_text(r, keys),
                                 r.num_parameters ? std::to_string(*r.num_parameters) : "",
                                 r.wall_seconds ? fmt::format("{:.3f}", *r.wall_seconds) : ""};
    for (const auto& m : metrics) {
      auto s = summarize(r, m);
      for (auto v : {fmt::format("{:.9g}", s.final_value), std::to_string(s.final_epoch), fmt::format("{:.9g}", s.best),
                     std::to_string(s.best_epoch)}) {
        row.push_back(s.valid ? v : "");
      }
    }
    for (const auto& e : evals) {
      auto it = r.evals.find(e);
      row.push_back(it == r.evals.end() ? "" : fmt::format("{:.9g}", it->second.bleu));
      row.push_back(it == r.evals.end() || !it->second.bleu_lowercase
                        ? ""
                        : fmt::format("{:.9g}", *it->second.bleu_lowercase));
      row.push_back(it == r.evals.end() ? "" : fmt::format("{:.9g}", it->second.d2l_mean_bleu));
    }
    if (samples) row.push_back(r.samples_mean_bleu ? fmt::format("{:.9g}", *r.samples_mean_bleu) : "");
    for (const auto& [m, layers] : all) {
      for (const auto& [l, heads] : layers) {
        for (const auto& [h, unused] : heads) {
          std::string e, x;
          if (const HeadStats* s = find_head(r, m, l, h)) {
            e = fmt::format("{:.6g}", s->entropy);
            x = fmt::format("{:.6g}", s->max_weight);
          }
          row.push_back(e);
          row.push_back(x);
        }
      }
    }
    for (const auto& q : head_qs) {
      const auto v = q.of(r);
      row.push_back(v ? fmt::format("{:.9g}", *v) : "");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

/// --group-by: completed runs in groups; the others are named on stderr and left out.
int compare_groups(const std::vector<Run>& all, const std::vector<std::string>& keys,
                   const std::vector<std::string>& wanted, TableFormat format, bool attention, bool heads,
                   const std::string& plot_path, plot::PixelSize size, bool log_losses) {
  const auto runs = completed_runs(all, "compare");
  const auto groups = group_runs(runs, keys);
  const auto metrics = select_metrics(shared_metrics(runs), wanted);
  const auto qs = quantities(runs, metrics, attention, heads);
  if (format == TableFormat::Csv) {
    std::cout << render(grouped_csv(groups, qs, keys), format);
  } else {
    const bool md = format == TableFormat::Markdown;
    auto heading = [&](const std::string& s) { std::cout << (md ? "### " + s + "\n\n" : s + "\n"); };
    std::cout << fmt::format("{} runs in {} groups by {}\n\n", runs.size(), groups.size(), fmt::join(keys, ", "));
    heading("Groups");
    std::cout << render(groups_table(groups), format) << "\n";
    heading(grouped_heading(groups.size()));
    std::cout << render(grouped_table(groups, qs), format);
  }
  if (!plot_path.empty()) {
    plot::group_figure(groups, metrics, plot_path, size, log_losses);
    std::cerr << "wrote " << plot_path << "\n";
  }
  return 0;
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  CLI::App app{"Compare runs from their results files: differing config keys, metrics, attention statistics"};
  std::vector<std::string> files, wanted, group_by;
  std::string format = "table", plot_path;
  int width = 0, height = 0;
  bool linear = false, no_attention = false, no_heads = false;
  size_t top_heads = 10;
  app.add_option("files", files, "results files (.h5) of the runs to compare, or folders of them (a sweep's)")
      ->required()
      ->expected(1, -1);
  app.add_option("--group-by", group_by, "config keys (comma-separated): mean ± sd per group, Welch's test for two")
      ->delimiter(',');
  app.add_option("--metric", wanted, "metric to show, 'group/name' or 'name' (repeatable; default: all shared)")
      ->delimiter(',');
  app.add_option("--format", format, "table (aligned text), markdown or csv")
      ->check(CLI::IsMember({"table", "markdown", "csv"}));
  app.add_option("--plot", plot_path, "also draw the shared metrics' curves, one panel per metric (.png or .svg)");
  app.add_option("--width", width, "plot width in pixels (default: natural size)");
  app.add_option("--height", height, "plot height in pixels (default: natural size)");
  app.add_flag("--linear", linear, "linear y axis in the plot (default: log for losses)");
  app.add_flag("--no-attention", no_attention, "leave out the attention statistics");
  app.add_flag("--no-heads", no_heads, "leave out what runner ablate and runner prune stored (/ablation, /pruning)");
  app.add_option("--top-heads", top_heads, "per run and ablation, the heads whose removal costs most (0: every head)")
      ->capture_default_str();
  app.footer(
      "Examples:\n  runner compare results/first.h5 results/last.h5 --plot compare.png\n  runner compare results/norm-sweep --group-by model.norm --plot sweep.png");
  if (auto code = parse_command_line(app, argc, argv, "runner compare")) return *code;
  std::vector<Run> runs;
  for (const auto& f : expand_folders(files)) runs.push_back(load_run(f));  // ResultsError for non-results files
  if (!group_by.empty()) {
    return compare_groups(runs, group_by, wanted, parse_table_format(format), !no_attention, !no_heads, plot_path,
                          {width, height}, !linear);
  }
  const auto keys = differing_keys(runs);
  const auto metrics = select_metrics(shared_metrics(runs), wanted);
  const auto fmt_kind = parse_table_format(format);

  if (fmt_kind == TableFormat::Csv) {
    std::cout << render(csv_table(runs, keys, metrics, !no_heads), fmt_kind);
  } else {
    const bool md = fmt_kind == TableFormat::Markdown;
    auto heading = [&](const std::string& s) { std::cout << (md ? "### " + s + "\n\n" : s + "\n"); };
    constexpr size_t kListed = 8;  // unrelated runs differ in dozens of keys: the csv has them all
    const std::vector<std::string> listed(keys.begin(),
                                          keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), kListed)));
    std::cout << fmt::format("{} runs; differing config keys{}: {}{}\n\n", runs.size(),
                             keys.size() > kListed ? fmt::format(" ({})", keys.size()) : std::string(),
                             keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(listed, ", ")),
                             keys.size() > kListed ? ", ... (all of them: --format csv)" : "");
    heading("Runs");
    std::cout << render(runs_table(runs, keys), fmt_kind) << "\n";
    if (!metrics.empty()) {
      heading(kMetricsHeading);
      std::cout << render(metrics_table(runs, metrics), fmt_kind) << "\n";
    }
    if (auto ev = evals_table(runs); !ev.rows.empty()) {
      heading(kEvalsHeading);
      std::cout << render(ev, fmt_kind) << "\n";
    }
    auto att = attention_table(runs);
    const bool attention = !no_attention && !att.rows.empty();
    if (attention) {
      heading(kAttentionHeading);
      std::cout << render(att, fmt_kind);
    }
    if (!no_heads && any_heads(runs)) {  // runner ablate / prune: nothing printed for runs without them
      if (attention) std::cout << "\n";
      heading(kHeadsHeading);
      std::cout << render(heads_table(runs), fmt_kind);  // base_loss at least
      for (size_t i = 0; i < runs.size(); ++i) {
        for (const auto& a : runs[i].ablations) {
          std::cout << "\n";
          heading(top_heads_heading(run_id(i), a, top_heads));
          std::cout << render(top_heads_table(a, top_heads), fmt_kind);
        }
      }
    }
  }
  if (!plot_path.empty()) {
    plot::compare_figure(runs, metrics, keys, plot_path, {width, height}, !linear);
    std::cerr << "wrote " << plot_path << "\n";
  }
  return 0;
}

}  // namespace attnlab::tools
