// `runner ablate RUN.h5 [--split val] [--importance ablation|gradient|both]`: which heads of a
// finished run's model matter. Exact single-head ablation switches each head off alone (a head
// mask, nn/head_mask.hpp) and measures the split's teacher-forced loss and greedy BLEU against
// the full model; gradient importance is Michel et al. 2019's I_h = E|dL/dxi_h|, every head at
// once in one pass over the split. The table goes to /ablation/<name> of the run's results file,
// written once everything is computed (a failed or interrupted ablation leaves the file as it was).
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/translate.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <regex>

#include "cli/head_study.hpp"

namespace attnlab::cli {
namespace {

struct Row {
  std::string module;
  int64_t layer = 0, head = 0;  // from 1
  double loss = NAN, bleu = NAN, importance = NAN, importance_normalized = NAN;
};

}  // namespace

int cmd_ablate(int argc, char** argv) {
  CLI::App app{"which heads matter: switch each head off alone (delta loss and BLEU), or Michel et al.'s gradient "
               "importance, on a split of a finished run"};
  StudyArgs args;
  std::string importance = "both", name;
  std::vector<std::string> plugin_dirs;
  bool no_bleu = false, quiet = false;
  add_study_options(app, args);
  app.add_option("--importance", importance,
                 "ablation (each head off alone: delta loss and delta BLEU), gradient (Michel et al. 2019: "
                 "E|dL/dxi_h| in one pass, normalised per layer) or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"ablation", "gradient", "both"}));
  app.add_flag("--no-bleu", no_bleu, "ablation measures the loss only (no decoding: much faster)");
  app.add_option("--name", name, "group under /ablation (default: the split's name)");
  bool tokens = false;
  app.add_flag("--tokens", tokens,
               "blank out source tokens instead of heads (Abnar & Zuidema 2020): each token of the split's first "
               "--sentences sentences replaced by <unk> in turn, the change of the reference's loss; their "
               "attention is recorded for runner rollout");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "print only the summary lines");
  app.footer(
      "Examples:\n  runner ablate RUN.h5 --split val\n  runner ablate RUN.h5 --importance gradient\n"
      "  runner ablate RUN.h5 --split test --no-bleu --name test_loss\n"
      "  runner ablate RUN.h5 --tokens --sentences 100      # blank-out importance of source tokens\n"
      "Writes /ablation/<name>: one row per module x layer x head (module, layer, head from 1, loss, delta_loss, bleu,\n"
      "delta_bleu, importance, importance_normalized), read by runner compare and report and attnlab.load(...).");
  if (auto code = parse_command_line(app, argc, argv, "runner ablate")) return *code;
  const std::string &run = args.run, &split_name = args.split_name;
  if (name.empty()) name = tokens ? "tokens_" + split_name : split_name;
  check_group_name(name, "--name", "ablation");
  const bool by_ablation = importance != "gradient", by_gradient = importance != "ablation";
  HeadStudy study = open_head_study("ablate", args, plugin_dirs, quiet);
  if (tokens) return ablate_tokens(study, name, args.sentences > 0 ? args.sentences : 100, quiet);
  const auto& sites = study.sites;
  int64_t heads_total = 0;
  for (const auto& s : sites) heads_total += s.heads;
  const bool with_bleu = by_ablation && !no_bleu && study.translates();  // a language model: the loss alone
  if (!quiet) {
    spdlog::info("ablating {} heads of {} ({}) on the {} split: {} sentences, {} target tokens{}", heads_total, run,
                 run::describe_sites(sites), split_name, study.data.sentences, study.data.tokens,
                 with_bleu ? ", greedy BLEU each" : "");
  }
  const auto started = std::chrono::steady_clock::now();
  const nn::HeadMask* base = study.base();
  const nn::HeadMaskScope base_scope(base);
  const double base_loss = study.loss(false);
  metrics::BleuScore base_bleu;
  if (with_bleu) base_bleu = study.bleu();
  if (!quiet) {
    spdlog::info("full model: loss {:.4f}{}", base_loss, with_bleu ? fmt::format(", BLEU {:.2f}", base_bleu.score) : "");
  }
  std::vector<Row> rows;
  for (const auto& s : sites) {
    for (int64_t h = 0; h < s.heads; ++h) rows.push_back({s.module, s.layer + 1, h + 1});
  }
  if (by_ablation) {
    size_t r = 0;
    for (const auto& s : sites) {
      for (int64_t h = 0; h < s.heads; ++h, ++r) {
        if (study.off_in_training(s, h)) continue;
        const nn::HeadMask mask = study.mask_with_off({{&s, h}});  // the run's own mask, and this head off
        const nn::HeadMaskScope scope(&mask);
        rows[r].loss = study.loss(decoder_only(s.module));
        if (with_bleu) rows[r].bleu = study.bleu().score;
        if (!quiet) {
          spdlog::info("{} layer {} head {} off: loss {:.4f} ({:+.4f}){}", s.module, s.layer + 1, h + 1, rows[r].loss,
                       rows[r].loss - base_loss,
                       with_bleu ? fmt::format(", BLEU {:.2f} ({:+.2f})", rows[r].bleu, rows[r].bleu - base_bleu.score)
                                 : "");
        }
      }
    }
  }
  if (by_gradient) {
    const auto imp = study.importance(study.trained.mask);
    size_t r = 0;
    for (size_t i = 0; i < sites.size(); ++i) {
      auto on = imp[i].clone();
      for (int64_t h = 0; h < sites[i].heads; ++h) {
        if (study.off_in_training(sites[i], h)) on[h] = 0.0;
      }
      const double norm = on.pow(2).sum().sqrt().item<double>();  // Michel's per-layer L2 normalisation
      for (int64_t h = 0; h < sites[i].heads; ++h, ++r) {
        if (study.off_in_training(sites[i], h)) continue;
        rows[r].importance = imp[i][h].item<double>();
        rows[r].importance_normalized = rows[r].importance / (norm + 1e-20);
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // Everything computed: now the file, in one go.
  {
    results::Results out(run, results::Results::Open::Existing);
    const std::string at = "ablation/" + name;
    const auto existing = out.children("ablation");
    if (std::find(existing.begin(), existing.end(), name) != existing.end()) out.remove(at);
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<std::string> modules;
    results::IntArray layers{{n}, {}}, heads{{n}, {}};
    const auto column = [&](auto get) {
      results::FloatArray a{{n}, {}};
      for (const auto& row : rows) a.values.push_back(static_cast<float>(get(row)));
      return a;
    };
    for (const auto& row : rows) {
      modules.push_back(row.module);
      layers.values.push_back(row.layer);
      heads.values.push_back(row.head);
    }
    out.write_strings(at + "/module", modules);
    out.write_array(at + "/layer", layers);
    out.write_array(at + "/head", heads);
    if (by_ablation) {
      out.write_array(at + "/loss", column([](const Row& r) { return r.loss; }));
      out.write_array(at + "/delta_loss", column([&](const Row& r) { return r.loss - base_loss; }));
    }
    if (with_bleu) {
      out.write_array(at + "/bleu", column([](const Row& r) { return r.bleu; }));
      out.write_array(at + "/delta_bleu", column([&](const Row& r) { return r.bleu - base_bleu.score; }));
      out.set_attr_at(at, "base_bleu", base_bleu.score);
      out.set_attr_at(at, "bleu_signature", base_bleu.signature);
    }
    if (by_gradient) {
      out.write_array(at + "/importance", column([](const Row& r) { return r.importance; }));
      out.write_array(at + "/importance_normalized", column([](const Row& r) { return r.importance_normalized; }));
    }
    out.set_attr_at(at, "base_loss", base_loss);
    if (base != nullptr) out.set_attr_at(at, "trained_head_mask", study.trained.text);
    out.set_attr_at(at, "split", split_name);
    out.set_attr_at(at, "checkpoint", study.setup.weights);
    out.set_attr_at(at, "method", importance);
    out.set_attr_at(at, "sentences", study.data.sentences);  // those measured (--sentences: the first N)
    out.set_attr_at(at, "tokens", study.data.tokens);
    out.set_attr_at(at, "heads", n);
    out.set_attr_at(at, "seconds", seconds);
    out.set_attr_at(at, "decoding", std::string(with_bleu ? "greedy" : "none"));
    out.flush();
  }

  // The table, most harmful removals first when there are ablations.
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto key = [&](size_t i) {  // NaN (a head off in training) last
    const double v = by_ablation ? rows[i].loss : rows[i].importance;
    return std::isnan(v) ? -INFINITY : v;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  if (!quiet) {
    std::cout << fmt::format("{:<16} {:>5} {:>4}", "module", "layer", "head");
    if (by_ablation) std::cout << fmt::format(" {:>9} {:>9}", "loss", "Δloss");
    if (with_bleu) std::cout << fmt::format(" {:>7} {:>7}", "BLEU", "ΔBLEU");
    if (by_gradient) std::cout << fmt::format(" {:>11} {:>9}", "importance", "norm.");
    std::cout << "\n";
    for (const size_t i : order) {
      const Row& r = rows[i];
      std::cout << fmt::format("{:<16} {:>5} {:>4}", r.module, r.layer, r.head);
      if (by_ablation) std::cout << fmt::format(" {:>9.4f} {:>+9.4f}", r.loss, r.loss - base_loss);
      if (with_bleu) std::cout << fmt::format(" {:>7.2f} {:>+7.2f}", r.bleu, r.bleu - base_bleu.score);
      if (by_gradient) std::cout << fmt::format(" {:>11.3g} {:>9.3f}", r.importance, r.importance_normalized);
      std::cout << "\n";
    }
  }
  if (with_bleu) {
    const auto count = [&](auto pred) { return std::count_if(rows.begin(), rows.end(), pred); };
    std::cout << fmt::format(
        "{} heads, {} split: full model loss {:.4f}, BLEU {:.2f}; removed alone, {} lower BLEU by more than 0.5, {} "
        "raise it by more than 0.5, {} change it by at most 0.5 -> /ablation/{} ({:.1f}s)\n",
        rows.size(), split_name, base_loss, base_bleu.score,
        count([&](const Row& r) { return r.bleu < base_bleu.score - 0.5; }),
        count([&](const Row& r) { return r.bleu > base_bleu.score + 0.5; }),
        count([&](const Row& r) { return std::abs(r.bleu - base_bleu.score) <= 0.5; }), name, seconds);
  } else {
    std::cout << fmt::format("{} heads, {} split: full model loss {:.4f}; {} -> /ablation/{} ({:.1f}s)\n", rows.size(),
                             split_name, base_loss,
                             by_ablation ? fmt::format("the most harmful removal: {} layer {} head {} ({:+.4f})",
                                                       rows[order[0]].module, rows[order[0]].layer,
                                                       rows[order[0]].head, rows[order[0]].loss - base_loss)
                                         : fmt::format("the most important head by gradient: {} layer {} head {}",
                                                       rows[order[0]].module, rows[order[0]].layer,
                                                       rows[order[0]].head),
                             name, seconds);
  }
  return 0;
}

}  // namespace attnlab::cli
