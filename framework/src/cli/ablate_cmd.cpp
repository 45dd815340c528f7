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
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <regex>

#include "cli/run_loading.hpp"
#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {
namespace {

/// The split's batches on the model's device, once (every head's pass reads them again).
struct SplitData {
  std::vector<data::Batch> batches;
  std::vector<nn::EncoderOutput> encoded;  // the unmasked encoder's output per batch, once asked for
  int64_t tokens = 0;     // non-pad target tokens
  int64_t sentences = 0;
};

SplitData load_split(const data::Dataset& dataset, data::Split split, const torch::Device& device) {
  SplitData d;
  for (const auto& b : dataset.batches(split, false, 0)) {
    d.tokens += b.tgt_valid_lens.sum().item<int64_t>();
    d.sentences += b.size();
    d.batches.push_back(b.to(device));
  }
  return d;
}

/// The teacher-forced cross-entropy per target token (no label smoothing: val/loss's definition),
/// in eval mode, under whatever head mask is active. `reuse_encoder`: the mask leaves the encoder
/// as `base` (the run's own mask, or none) has it, so its output is computed once, under `base`,
/// and reused: the decoder alone runs again.
double split_loss(nn::EncoderDecoder& model, SplitData& split, const train::TokenLoss& how, bool reuse_encoder,
                  const nn::HeadMask* base) {
  torch::NoGradGuard no_grad;
  if (reuse_encoder && split.encoded.empty()) {
    const nn::HeadMaskScope as_base(base);
    for (const auto& b : split.batches) split.encoded.push_back(model->encode(b.src, b.src_valid_lens));
  }
  auto sum = torch::zeros({}, torch::dtype(torch::kDouble).device(split.batches.front().src.device()));
  for (size_t i = 0; i < split.batches.size(); ++i) {
    const auto& b = split.batches[i];
    torch::Tensor out;  // [B, T, V]
    if (reuse_encoder) {
      const auto state = model->init_state(split.encoded[i], /*incremental=*/false);
      out = model->decode(b.tgt_in, *state);
    } else {
      out = model->forward(b.src, b.src_valid_lens, b.tgt_in);
    }
    sum += train::token_loss(out, b.tgt_out, how).to(torch::kDouble);
  }
  return sum.item<double>() / static_cast<double>(std::max<int64_t>(split.tokens, 1));
}

/// Whether a mask on `module` leaves the encoder's output unchanged: the decoder's own modules.
bool decoder_only(const std::string& module) { return module == nn::kDecoderSelf || module == nn::kDecoderCross; }

/// The multipliers of `site` under `base` (the run's own mask): ones where it leaves the site alone.
torch::Tensor xi_of(const nn::HeadMask& base, const nn::AttentionSite& site, const torch::Device& device) {
  const auto xi = base.get(site.module, site.layer);
  return xi.defined() ? xi.detach().to(device, torch::kFloat).clone()
                      : torch::ones({site.heads}, torch::dtype(torch::kFloat).device(device));
}

/// Michel et al.'s importance of every head at once: xi as `base` has it (1 for every head the run
/// trained with) for every site, requiring grad; per batch the gradient of the batch's summed token
/// loss, its absolute value accumulated, divided by the split's tokens at the end. One value per
/// site and head, [heads] each.
std::vector<torch::Tensor> gradient_importance(nn::EncoderDecoder& model, const SplitData& split,
                                               const train::TokenLoss& how, const std::vector<nn::AttentionSite>& sites,
                                               const nn::HeadMask& base, const torch::Device& device) {
  nn::HeadMask mask;
  std::vector<torch::Tensor> xi, total;
  for (const auto& s : sites) {
    xi.push_back(xi_of(base, s, device).requires_grad_(true));
    total.push_back(torch::zeros({s.heads}, torch::dtype(torch::kDouble).device(device)));
    mask.set(s.module, s.layer, xi.back());
  }
  // Only xi needs a gradient: the weights' are not computed.
  std::vector<std::pair<torch::Tensor, bool>> frozen;
  for (auto& p : model->parameters()) {
    frozen.emplace_back(p, p.requires_grad());
    p.requires_grad_(false);
  }
  const nn::HeadMaskScope scope(&mask);
  try {
    for (const auto& b : split.batches) {
      auto loss = train::token_loss(model->forward(b.src, b.src_valid_lens, b.tgt_in), b.tgt_out, how);
      if (!loss.requires_grad()) continue;  // a batch with no target token
      loss.backward();
      for (size_t i = 0; i < xi.size(); ++i) {
        if (!xi[i].grad().defined()) continue;
        total[i] += xi[i].grad().abs().to(torch::kDouble);
        xi[i].mutable_grad().zero_();
      }
    }
  } catch (...) {
    for (auto& [p, was] : frozen) p.requires_grad_(was);
    throw;
  }
  for (auto& [p, was] : frozen) p.requires_grad_(was);
  for (auto& t : total) t = (t / static_cast<double>(std::max<int64_t>(split.tokens, 1))).cpu();
  return total;
}

struct Row {
  std::string module;
  int64_t layer = 0, head = 0;  // from 1
  double loss = NAN, bleu = NAN, importance = NAN, importance_normalized = NAN;
};

}  // namespace

int cmd_ablate(int argc, char** argv) {
  CLI::App app{"which heads matter: switch each head off alone (delta loss and BLEU), or Michel et al.'s gradient "
               "importance, on a split of a finished run"};
  std::string run, split_name = "val", which = "best", importance = "both", name;
  std::vector<std::string> overrides, plugin_dirs;
  bool no_bleu = false, quiet = false;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", overrides, "key.path=value changes to the stored config (e.g. device=cpu)");
  app.add_option("--split", split_name, "train, val or test")->capture_default_str();
  app.add_option("--checkpoint", which, "best, last, epoch-N or a runner average's name")->capture_default_str();
  app.add_option("--importance", importance,
                 "ablation (each head off alone: delta loss and delta BLEU), gradient (Michel et al. 2019: "
                 "E|dL/dxi_h| in one pass, normalised per layer) or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"ablation", "gradient", "both"}));
  app.add_flag("--no-bleu", no_bleu, "ablation measures the loss only (no decoding: much faster)");
  app.add_option("--name", name, "group under /ablation (default: the split's name)");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "print only the summary lines");
  app.footer(
      "Examples:\n  runner ablate RUN.h5 --split val\n  runner ablate RUN.h5 --importance gradient\n"
      "  runner ablate RUN.h5 --split test --no-bleu --name test_loss\n"
      "Writes /ablation/<name>: one row per module x layer x head (module, layer, head from 1, loss, delta_loss, bleu,\n"
      "delta_bleu, importance, importance_normalized), read by runner compare and report and attnlab.load(...).");
  if (auto code = parse_command_line(app, argc, argv, "runner ablate")) return *code;
  const auto split = parse_split(split_name);
  if (name.empty()) name = split_name;
  ATTNLAB_CHECK(std::regex_match(name, std::regex("[A-Za-z0-9_-][A-Za-z0-9_.-]*")), ConfigError,
                "--name '{}': expected letters, digits, '_', '-' and '.', not first (one name under /ablation, no '/')",
                name);
  const bool by_ablation = importance != "gradient", by_gradient = importance != "ablation";

  const auto status = results::read_isolated(run, [&] { return results::ResultsReader(run).status(); });
  ATTNLAB_CHECK(status != results::Status::Running, ResultsError,
                "run {} is still running (or died without a word): ablate a finished run", run);
  if (status != results::Status::Completed && !quiet) {
    spdlog::warn("run {} is {}: its '{}' checkpoint is what gets ablated", run, results::status_name(status), which);
  }
  run::HeadMaskSpec trained_spec;  // heads the run trained without: off in every measurement
  run::Setup setup = load_run(run, which, overrides, plugin_dirs, trained_spec);
  nn::EncoderDecoder& model = setup.model;
  const auto sites = nn::attention_sites(*model);
  ATTNLAB_CHECK(!sites.empty(), ConfigError,
                "run {}: its model has no attention module with heads that a mask reaches (the framework's attention "
                "in the transformer encoder and decoder and the GRU-Bahdanau decoder)",
                run);
  ATTNLAB_CHECK(setup.dataset->has_split(split), ConfigError, "run {}: its dataset has no {} split", run, split_name);
  model->eval();
  const auto device = setup.ctx.device;
  const run::ResolvedHeadMask trained = run::resolve_head_mask(trained_spec, sites, device);
  const nn::HeadMask* base = trained.mask.empty() ? nullptr : &trained.mask;
  const auto off_in_training = [&](const nn::AttentionSite& s, int64_t h) {
    const auto xi = trained.mask.get(s.module, s.layer);
    return xi.defined() && xi[h].item<float>() == 0.0f;
  };
  SplitData data = load_split(*setup.dataset, split, device);
  ATTNLAB_CHECK(data.tokens > 0, ConfigError, "the {} split of run {} has no target tokens to measure a loss on",
                split_name, run);
  const train::TokenLoss how{.pad = setup.dataset->info().pad_id,
                             .probabilities = model->decoder().outputs_probabilities(),
                             .label_smoothing = 0,
                             .reduce = train::TokenLoss::Reduce::sum};
  int64_t heads_total = 0;
  for (const auto& s : sites) heads_total += s.heads;
  const bool with_bleu = by_ablation && !no_bleu;
  if (!quiet) {
    spdlog::info("ablating {} heads of {} ({}) on the {} split: {} sentences, {} target tokens{}", heads_total, run,
                 run::describe_sites(sites), split_name, data.sentences, data.tokens,
                 with_bleu ? ", greedy BLEU each" : "");
  }
  const auto started = std::chrono::steady_clock::now();
  if (base != nullptr && !quiet) {
    spdlog::info("the run trained with head mask {}: those {} heads stay off, and their rows are NaN",
                 trained.text, trained.heads_off);
  }
  const nn::HeadMaskScope base_scope(base);
  const auto bleu_now = [&] {
    return train::score_translation(train::translate_split(model, *setup.dataset, split, {})).bleu;
  };
  const double base_loss = split_loss(model, data, how, false, base);
  metrics::BleuScore base_bleu;
  if (with_bleu) base_bleu = bleu_now();
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
        if (off_in_training(s, h)) continue;
        nn::HeadMask mask = trained.mask;  // the run's own mask, and this head off
        auto xi = xi_of(trained.mask, s, device);
        xi[h] = 0.0f;
        mask.set(s.module, s.layer, xi);
        const nn::HeadMaskScope scope(&mask);
        rows[r].loss = split_loss(model, data, how, decoder_only(s.module), base);
        if (with_bleu) rows[r].bleu = bleu_now().score;
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
    const auto imp = gradient_importance(model, data, how, sites, trained.mask, device);
    size_t r = 0;
    for (size_t i = 0; i < sites.size(); ++i) {
      auto on = imp[i].clone();
      for (int64_t h = 0; h < sites[i].heads; ++h) {
        if (off_in_training(sites[i], h)) on[h] = 0.0;
      }
      const double norm = on.pow(2).sum().sqrt().item<double>();  // Michel's per-layer L2 normalisation
      for (int64_t h = 0; h < sites[i].heads; ++h, ++r) {
        if (off_in_training(sites[i], h)) continue;
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
    if (base != nullptr) out.set_attr_at(at, "trained_head_mask", trained.text);
    out.set_attr_at(at, "split", split_name);
    out.set_attr_at(at, "checkpoint", which);
    out.set_attr_at(at, "method", importance);
    out.set_attr_at(at, "sentences", data.sentences);
    out.set_attr_at(at, "tokens", data.tokens);
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
        "raise it, {} change it by at most 0.5 -> /ablation/{} ({:.1f}s)\n",
        rows.size(), split_name, base_loss, base_bleu.score,
        count([&](const Row& r) { return r.bleu < base_bleu.score - 0.5; }),
        count([&](const Row& r) { return r.bleu > base_bleu.score; }),
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
