#include "tools/compare_tables.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace attnlab::tools {
namespace {

std::string num(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

/// One row per run: who it is and how it went.
Table runs_table(const std::vector<Run>& runs, const std::vector<std::string>& keys) {
  Table t{{"run", "experiment", "status", "differs", "params", "wall", "file"},
          {},
          {false, false, false, false, true, true}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    t.rows.push_back({run_id(i), r.experiment, r.status, differs_text(r, keys, 3, 40),
                      r.num_parameters ? std::to_string(*r.num_parameters) : "-",
                      r.wall_seconds ? (r.wall_partial ? ">=" : "") + format_seconds(*r.wall_seconds) : "-", r.path});
  }
  return t;
}

/// metric | value | A | B ...: final and best with the epoch each was reached.
Table metrics_table(const std::vector<Run>& runs, const std::vector<std::string>& metrics) {
  Table t{{"metric", "value"}, {}, {false, false}};
  for (size_t i = 0; i < runs.size(); ++i) {
    t.header.push_back(run_id(i));
    t.numeric.push_back(true);
  }
  for (const auto& m : metrics) {
    std::vector<std::string> fin{m, "final"}, best{"", higher_is_better(m) ? "best (max)" : "best (min)"};
    for (const auto& r : runs) {
      auto s = summarize(r, m);
      const char* at = per_step(m) ? "@step " : "@";  // a per-step series counts optimizer steps
      fin.push_back(s.valid ? fmt::format("{} {}{}", num(s.final_value), at, s.final_epoch) : "-");
      best.push_back(s.valid ? fmt::format("{} {}{}", num(s.best), at, s.best_epoch) : "-");
    }
    t.rows.push_back(std::move(fin));
    t.rows.push_back(std::move(best));
  }
  return t;
}

/// evaluation | decoding | A | B ...: sacreBLEU, lowercased sacreBLEU (and d2l's mean sentence BLEU)
/// per run; "-" for the lowercased score of files written before runner eval stored it.
Table evals_table(const std::vector<Run>& runs) {
  Table t{{"evaluation", "decoding"}, {}, {false, false}};
  for (size_t i = 0; i < runs.size(); ++i) {
    t.header.push_back(run_id(i) + " sacreBLEU / lowercased (d2l)");
    t.numeric.push_back(true);
  }
  for (const auto& name : eval_names(runs)) {
    // One decoding when the runs agree; else each run's, by its letter (two runs whose penalties
    // were picked on val apiece may have picked different ones).
    std::vector<std::pair<std::string, std::string>> decodings;  // run letter, decoding
    std::vector<std::string> row{name, ""};
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].evals.find(name);
      if (it == runs[i].evals.end()) {
        row.push_back("-");
        continue;
      }
      const auto& e = it->second;
      const std::string lp = e.length_penalty ? fmt::format(" (length penalty {:g}{})", *e.length_penalty,
                                                            e.length_penalty_tuned ? ", picked on val" : "")
                                              : "";
      decodings.emplace_back(run_id(i), e.beam_size > 1
                                            ? fmt::format("beam {}{}, {} checkpoint", e.beam_size, lp, e.checkpoint)
                                            : fmt::format("greedy, {} checkpoint", e.checkpoint));
      row.push_back(fmt::format("{:.2f} / {} ({:.3f})", e.bleu,
                                e.bleu_lowercase ? fmt::format("{:.2f}", *e.bleu_lowercase) : std::string("-"),
                                e.d2l_mean_bleu));
    }
    const bool same = std::all_of(decodings.begin(), decodings.end(),
                                  [&](const auto& d) { return d.second == decodings.front().second; });
    if (same && !decodings.empty()) {
      row[1] = decodings.front().second;
    } else {
      for (const auto& [id, d] : decodings) row[1] += fmt::format("{}{}: {}", row[1].empty() ? "" : "; ", id, d);
    }
    t.rows.push_back(std::move(row));
  }
  // The experiment's evaluate.samples, translated at the end of training: d2l's mean sentence BLEU.
  if (any_samples(runs)) {
    std::vector<std::string> row{"samples", "end of training"};
    for (const auto& r : runs) {
      row.push_back(r.samples_mean_bleu ? fmt::format("- ({:.3f}, {} sentences)", *r.samples_mean_bleu, r.samples)
                                        : std::string("-"));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

/// module | layer | head | A | B ...: "mean entropy / max weight" per head.
Table attention_table(const std::vector<Run>& runs) {
  Table t{{"module", "layer", "head"}, {}, {false, true, true}};
  for (size_t i = 0; i < runs.size(); ++i) {
    t.header.push_back(run_id(i) + " entropy / max");
    t.numeric.push_back(true);
  }
  const AttentionStats all = union_of_heads(runs);
  for (const auto& [m, layers] : all) {
    for (const auto& [l, heads] : layers) {
      for (const auto& [h, unused] : heads) {
        std::vector<std::string> row{m, std::to_string(l + 1), std::to_string(h + 1)};
        for (const auto& r : runs) {
          const HeadStats* s = find_head(r, m, l, h);
          row.push_back(s ? fmt::format("{:.3f} / {:.3f}", s->entropy, s->max_weight) : "-");
        }
        t.rows.push_back(std::move(row));
      }
    }
  }
  return t;
}

std::string run_id(size_t i) { return i < 26 ? std::string(1, static_cast<char>('A' + i)) : fmt::format("R{}", i + 1); }

/// The files to read: each argument, a folder standing for the .h5 files directly inside it (a
/// sweep folder), sorted.
std::vector<std::string> expand_folders(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& a : args) {
    // Anything but a folder (a symlink loop included) goes to the reader, which names what it is.
    if (!files::problem(a, files::Want::Directory).empty()) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> inside;
    std::error_code ec;
    for (fs::directory_iterator it(a, ec), end; !ec && it != end; it.increment(ec)) {
      const auto path = it->path().string();
      if (it->path().extension() == ".h5" && files::problem(path, files::Want::File).empty()) inside.push_back(path);
    }
    ATTNLAB_CHECK(!ec, Error, "cannot list the folder {}: {}", a, ec.message());
    ATTNLAB_CHECK(!inside.empty(), Error, "{} is a folder without results files (.h5)", a);
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }
  return files;
}

std::vector<Run> completed_runs(const std::vector<Run>& all, const std::string& command) {
  std::vector<Run> runs;
  for (const auto& r : all) {
    if (r.status == "completed") {
      runs.push_back(r);
    } else {
      std::cerr << fmt::format("{}: {} left out of the groups: its status is '{}'\n", command, r.path, r.status);
    }
  }
  ATTNLAB_CHECK(!runs.empty(), Error, "--group-by: none of the {} runs completed", all.size());
  return runs;
}

std::string grouped_heading(size_t groups) {
  return groups == 2 ? "Mean ± sd [min, max] per group; p: Welch's two-sided t-test; g: Hedges' g (bias-corrected "
                       "Cohen's d, pooled sd) of the first group minus the second"
                     : "Mean ± sd [min, max] per group (sd: sample, n - 1)";
}

}  // namespace attnlab::tools
