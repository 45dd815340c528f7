// `runner report RUN.h5 [...] -o PAGE.html`: one self-contained HTML page (Vega inlined) with a
// run's or several runs' curves, compare's tables and an attention explorer (report/).
#include "tools/commands.hpp"
#include "tools/compare_tables.hpp"
#include "tools/group.hpp"
#include "tools/report/extras.hpp"
#include "tools/report/model.hpp"
#include "tools/report/page.hpp"
#include "tools/runs.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>

namespace attnlab::tools {

int cmd_report(int argc, char** argv) {
  CLI::App app{"Write one self-contained HTML page of runs: curves, compare's tables, an attention explorer"};
  std::vector<std::string> files, group_by;
  std::string out;
  report::AttentionLimits limits;
  app.add_option("files", files, "results files (.h5), or folders of them (a sweep's)")->required()->expected(1, -1);
  app.add_option("-o,--out", out, "the HTML file to write")->required()->check(not_an_option());
  app.add_option("--group-by", group_by, "config keys (comma-separated): the runs in groups, as compare shows them")
      ->delimiter(',');
  app.add_option("--max-tokens", limits.max_tokens, "attention: tokens kept per axis of a map")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  app.add_option("--max-weights", limits.max_cells, "attention: weights the page may hold (whole samples are dropped)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  app.footer(
      "Examples:\n  runner report results/run.h5 -o run.html\n  runner report results/first.h5 results/last.h5 -o "
      "cmp.html\n"
      "  runner report results/norm-sweep --group-by model.norm -o sweep.html");
  if (auto code = parse_command_line(app, argc, argv, "runner report")) return *code;
  if (auto why = report::output_problem(out); !why.empty()) {
    throw Error(fmt::format("report: -o {}: {}", out, why));
  }
  std::vector<Run> all;
  for (const auto& f : expand_folders(files)) all.push_back(load_run(f));  // ResultsError for non-results files
  report::PageInput in;
  in.group_by = group_by;
  in.runs = group_by.empty() ? all : completed_runs(all, "report");
  if (!group_by.empty()) group_runs(in.runs, group_by);  // an unknown key: the error compare gives
  for (const auto& r : in.runs) {
    in.extras.push_back(results::read_isolated(r.path, [&] { return report::read_extras(r.path, limits.max_tokens); }));
  }
  in.attention_note = report::subsample_attention(in.extras, limits);
  const std::string title = in.runs.size() == 1
                                ? fmt::format("{} ({})", in.runs.front().experiment, in.runs.front().path)
                                : fmt::format("{} runs: {}", in.runs.size(), in.runs.front().experiment);
  const auto page = report::page_html("attnlab report: " + title, report::page_data(in));
  report::write_atomically(out, page);
  std::cerr << fmt::format("wrote {} ({:.1f} MB, {} run{})\n", out, static_cast<double>(page.size()) / 1e6,
                           in.runs.size(), in.runs.size() == 1 ? "" : "s");
  if (!in.attention_note.empty()) std::cerr << "report: " << in.attention_note << "\n";
  return 0;
}

}  // namespace attnlab::tools
