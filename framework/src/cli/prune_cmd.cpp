// `runner prune RUN.h5 [--order importance|random] [--step 10%]`: Michel et al. 2019's pruning
// curve. Heads are switched off a step at a time (a head mask, nn/head_mask.hpp) in order of
// importance (the lowest first, re-estimated at every step as the paper's iterative pruning does,
// or once with --one-shot) or in random orders (the baseline, --repeats of them), and the split's
// loss and greedy BLEU are measured at every point. The curve goes to /pruning/<name> of the run's
// results file, written once everything is computed.
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/results.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>

#include "cli/head_study.hpp"

namespace attnlab::cli {
namespace {

/// `--step`: "10%" of the heads (rounded up, at least 1) or a count of heads.
int64_t parse_step(const std::string& text, int64_t heads) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ATTNLAB_CHECK(used == number.size() && !number.empty() && value > 0 && std::isfinite(value), ConfigError,
                "--step '{}': expected a percentage of the heads (10%) or a number of heads (4), above 0", text);
  if (percent) {
    ATTNLAB_CHECK(value <= 100, ConfigError, "--step '{}': at most 100%", text);
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(value / 100.0 * static_cast<double>(heads) - 1e-9)));
  }
  ATTNLAB_CHECK(value == std::floor(value), ConfigError, "--step '{}': a number of heads is a whole number", text);
  return std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(value), heads));
}

/// Michel et al.'s per-layer normalised importance of each head in `heads` at `mask`.
std::vector<double> normalised_importance(HeadStudy& study, const nn::HeadMask& mask, const std::vector<Head>& heads) {
  const auto imp = study.importance(mask);
  std::vector<double> out;
  for (const auto& h : heads) {
    const size_t i = static_cast<size_t>(h.site - study.sites.data());
    // The layer's norm over its heads that are still on (xi = 1 in `mask`).
    const auto xi = mask.get(h.site->module, h.site->layer);
    auto on = imp[i].clone();
    if (xi.defined()) on = on * xi.to(torch::kCPU, torch::kDouble);
    const double norm = on.pow(2).sum().sqrt().item<double>();
    out.push_back(imp[i][h.index].item<double>() / (norm + 1e-20));
  }
  return out;
}

}  // namespace

int cmd_prune(int argc, char** argv) {
  CLI::App app{"Michel et al.'s pruning curve: switch heads off step by step, least important first (or in random "
               "orders), measuring the split's loss and BLEU at every step"};
  StudyArgs args;
  std::string order = "importance", step_text = "10%", name;
  std::vector<std::string> plugin_dirs;
  bool one_shot = false, no_bleu = false, quiet = false;
  int64_t repeats = 3;
  int64_t seed = 0;  // read signed: CLI11 turns "-1" into 2^64-1 for an unsigned option
  add_study_options(app, args);
  app.add_option("--order", order,
                 "importance (the least important heads first, Michel et al.'s gradient importance normalised per "
                 "layer) or random (the baseline)")
      ->capture_default_str()
      ->check(CLI::IsMember({"importance", "random"}));
  app.add_flag("--one-shot", one_shot,
               "importance estimated once on the full model (default: re-estimated after every step, the paper's "
               "iterative pruning)");
  app.add_option("--step", step_text, "heads switched off per step: a percentage of all heads (10%) or a number")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "random orders tried (--order random)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  app.add_option("--seed", seed, "seed of the random orders")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_flag("--no-bleu", no_bleu, "the loss only at every step (no decoding: much faster)");
  app.add_option("--name", name, "group under /pruning (default <order>[_oneshot]_<split>)");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "print only the summary line");
  app.footer(
      "Examples:\n  runner prune RUN.h5 --order importance --step 10%\n  runner prune RUN.h5 --order random "
      "--repeats 3\n  runner prune RUN.h5 --one-shot --no-bleu --step 1\n"
      "Writes /pruning/<name> (docs/RESULTS.md): heads_off, fraction, loss and bleu per step and repeat, the order\n"
      "in which the heads went; runner compare, report and plot and attnlab.load(...) read it.");
  if (auto code = parse_command_line(app, argc, argv, "runner prune")) return *code;
  const std::string &run = args.run, &split_name = args.split_name;
  const bool random = order == "random";
  ATTNLAB_CHECK(!(random && one_shot), ConfigError, "--one-shot is for --order importance (a random order is one shot)");
  if (name.empty()) name = fmt::format("{}{}_{}", order, one_shot ? "_oneshot" : "", split_name);
  check_group_name(name, "--name", "pruning");
  if (!random) repeats = 1;

  HeadStudy study = open_head_study("prune", args, plugin_dirs, quiet);
  const auto& all = study.heads;
  const auto n = static_cast<int64_t>(all.size());
  const int64_t step = parse_step(step_text, n);
  std::vector<int64_t> points;  // heads off at each point: 0, step, 2 step, ..., n
  for (int64_t k = 0; k < n; k += step) points.push_back(k);
  points.push_back(n);
  const bool with_bleu = !no_bleu && study.translates();  // a language model: the loss alone
  if (!quiet) {
    spdlog::info("pruning {} heads of {} ({}) on the {} split, {} per step, {}{}: {} points{}", n, run,
                 run::describe_sites(study.sites), split_name, step,
                 random ? fmt::format("{} random orders (seed {})", repeats, seed)
                        : (one_shot ? "least important first (importance once)"
                                    : "least important first (importance re-estimated every step)"),
                 "", points.size(), with_bleu ? ", greedy BLEU at each" : "");
  }
  const auto started = std::chrono::steady_clock::now();
  const nn::HeadMaskScope base_scope(study.base());
  const double base_loss = study.loss(false);
  metrics::BleuScore base_bleu;
  if (with_bleu) base_bleu = study.bleu();

  std::vector<std::vector<int64_t>> orders(static_cast<size_t>(repeats));      // indices into `all`
  std::vector<std::vector<double>> losses(orders.size()), bleus(orders.size());  // per repeat, per point
  for (int64_t r = 0; r < repeats; ++r) {
    auto& removed = orders[static_cast<size_t>(r)];
    std::vector<int64_t> remaining(static_cast<size_t>(n));
    std::iota(remaining.begin(), remaining.end(), 0);
    std::vector<int64_t> fixed;  // a random permutation, or the one-shot importance order
    if (random) {
      fixed = remaining;
      std::mt19937_64 rng(static_cast<uint64_t>(seed) + static_cast<uint64_t>(r));
      std::shuffle(fixed.begin(), fixed.end(), rng);
    } else if (one_shot) {
      const auto score = normalised_importance(study, study.trained.mask, all);
      fixed = remaining;
      std::stable_sort(fixed.begin(), fixed.end(), [&](int64_t a, int64_t b) { return score[a] < score[b]; });
    }
    for (size_t p = 0; p < points.size(); ++p) {
      // Switch off heads up to points[p].
      while (static_cast<int64_t>(removed.size()) < points[p]) {
        const auto count = static_cast<size_t>(points[p]) - removed.size();
        std::vector<int64_t> next;
        if (!fixed.empty()) {
          next.assign(fixed.begin() + static_cast<int64_t>(removed.size()),
                      fixed.begin() + static_cast<int64_t>(removed.size() + count));
        } else {  // iterative: importance of the heads still on, at the current mask
          std::vector<Head> off;
          for (const int64_t i : removed) off.push_back(all[static_cast<size_t>(i)]);
          std::vector<Head> on;
          for (const int64_t i : remaining) on.push_back(all[static_cast<size_t>(i)]);
          const auto score = normalised_importance(study, study.mask_with_off(off), on);
          std::vector<size_t> rank(on.size());
          std::iota(rank.begin(), rank.end(), size_t{0});
          std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
          for (size_t k = 0; k < count; ++k) next.push_back(remaining[rank[k]]);
        }
        for (const int64_t i : next) {
          removed.push_back(i);
          remaining.erase(std::find(remaining.begin(), remaining.end(), i));
        }
      }
      std::vector<Head> off;
      bool encoder_touched = false;
      for (const int64_t i : removed) {
        off.push_back(all[static_cast<size_t>(i)]);
        encoder_touched = encoder_touched || !decoder_only(off.back().site->module);
      }
      const nn::HeadMask mask = study.mask_with_off(off);
      const nn::HeadMaskScope scope(&mask);
      losses[r].push_back(p == 0 ? base_loss : study.loss(!encoder_touched));
      bleus[r].push_back(!with_bleu ? NAN : p == 0 ? base_bleu.score : study.bleu().score);
      if (!quiet) {
        spdlog::info("{}{} heads off ({:.0f}%): loss {:.4f}{}", random ? fmt::format("order {}: ", r + 1) : "",
                     points[p], 100.0 * static_cast<double>(points[p]) / static_cast<double>(n), losses[r].back(),
                     with_bleu ? fmt::format(", BLEU {:.2f}", bleus[r].back()) : "");
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // Everything computed: now the file, in one go.
  const auto P = static_cast<int64_t>(points.size());
  {
    results::Results out(run, results::Results::Open::Existing);
    const std::string at = "pruning/" + name;
    const auto existing = out.children("pruning");
    if (std::find(existing.begin(), existing.end(), name) != existing.end()) out.remove(at);
    std::vector<std::string> modules;
    results::IntArray layers{{n}, {}}, heads{{n}, {}}, order_ids{{repeats, n}, {}}, heads_off{{P}, points};
    for (const auto& h : all) {
      modules.push_back(h.site->module);
      layers.values.push_back(h.site->layer + 1);
      heads.values.push_back(h.index + 1);
    }
    for (const auto& o : orders) {
      auto full = o;  // a curve that stops before every head is off still lists every head's place
      for (int64_t i = 0; i < n; ++i) {
        if (std::find(full.begin(), full.end(), i) == full.end()) full.push_back(i);
      }
      order_ids.values.insert(order_ids.values.end(), full.begin(), full.end());
    }
    results::FloatArray fraction{{P}, {}}, loss{{repeats, P}, {}}, bleu{{repeats, P}, {}};
    for (const int64_t k : points) fraction.values.push_back(static_cast<float>(static_cast<double>(k) / n));
    for (int64_t r = 0; r < repeats; ++r) {
      for (int64_t p = 0; p < P; ++p) {
        loss.values.push_back(static_cast<float>(losses[r][p]));
        bleu.values.push_back(static_cast<float>(bleus[r][p]));
      }
    }
    out.write_strings(at + "/module", modules);
    out.write_array(at + "/layer", layers);
    out.write_array(at + "/head", heads);
    out.write_array(at + "/order", order_ids);
    out.write_array(at + "/heads_off", heads_off);
    out.write_array(at + "/fraction", fraction);
    out.write_array(at + "/loss", loss);
    if (with_bleu) {
      out.write_array(at + "/bleu", bleu);
      out.set_attr_at(at, "base_bleu", base_bleu.score);
      out.set_attr_at(at, "bleu_signature", base_bleu.signature);
    }
    if (study.base() != nullptr) out.set_attr_at(at, "trained_head_mask", study.trained.text);
    out.set_attr_at(at, "split", split_name);
    out.set_attr_at(at, "checkpoint", study.setup.weights);
    out.set_attr_at(at, "order", order);
    out.set_attr_at(at, "reestimate", static_cast<int64_t>(!random && !one_shot));
    out.set_attr_at(at, "repeats", repeats);
    out.set_attr_at(at, "seed", seed);
    out.set_attr_at(at, "step", step);
    out.set_attr_at(at, "heads_total", n);
    out.set_attr_at(at, "sentences", study.data.sentences);
    out.set_attr_at(at, "base_loss", base_loss);
    out.set_attr_at(at, "seconds", seconds);
    out.set_attr_at(at, "decoding", std::string(with_bleu ? "greedy" : "none"));
    out.flush();
  }

  // The curve: one row per point, the mean (and the range over random orders).
  const auto mean_of = [&](const std::vector<std::vector<double>>& v, int64_t p) {
    double s = 0;
    for (const auto& r : v) s += r[static_cast<size_t>(p)];
    return s / static_cast<double>(v.size());
  };
  const auto range_of = [&](const std::vector<std::vector<double>>& v, int64_t p) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& r : v) {
      lo = std::min(lo, r[static_cast<size_t>(p)]);
      hi = std::max(hi, r[static_cast<size_t>(p)]);
    }
    return std::pair{lo, hi};
  };
  if (!quiet) {
    std::cout << fmt::format("{:>9} {:>9} {:>9}{}{}\n", "heads off", "fraction", "loss", with_bleu ? fmt::format(" {:>7}", "BLEU") : "",
                             repeats > 1 ? "  (mean; min-max over the orders)" : "");
    for (int64_t p = 0; p < P; ++p) {
      std::string line = fmt::format("{:>9} {:>8.1f}% {:>9.4f}", points[p], 100.0 * points[p] / n, mean_of(losses, p));
      if (with_bleu) line += fmt::format(" {:>7.2f}", mean_of(bleus, p));
      if (repeats > 1) {
        const auto [lo, hi] = range_of(with_bleu ? bleus : losses, p);
        line += fmt::format("  [{:.{}f}, {:.{}f}]", lo, with_bleu ? 2 : 4, hi, with_bleu ? 2 : 4);
      }
      std::cout << line << "\n";
    }
  }
  // The summary: the most heads off while staying within 0.5 BLEU (or 1% of the loss) of the full model.
  int64_t within = 0;
  for (int64_t p = 0; p < P; ++p) {
    const bool ok = with_bleu ? mean_of(bleus, p) >= base_bleu.score - 0.5 : mean_of(losses, p) <= base_loss * 1.01;
    if (!ok) break;
    within = points[p];
  }
  std::cout << fmt::format(
      "{} heads, {} split, {}: {} heads off ({:.0f}%) stay within {} of the full model ({}) -> /pruning/{} "
      "({:.1f}s)\n",
      n, split_name,
      random ? fmt::format("{} random orders", repeats) : (one_shot ? "importance (one shot)" : "importance (iterative)"),
      within, 100.0 * static_cast<double>(within) / static_cast<double>(n),
      with_bleu ? std::string("0.5 BLEU") : std::string("1% of the loss"),
      with_bleu ? fmt::format("BLEU {:.2f}", base_bleu.score) : fmt::format("loss {:.4f}", base_loss), name, seconds);
  return 0;
}

}  // namespace attnlab::cli
