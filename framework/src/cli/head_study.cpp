// A finished run opened for measuring its heads (cli/head_study.hpp).
#include "cli/head_study.hpp"

#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/translate.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <regex>

#include "cli/run_loading.hpp"

namespace attnlab::cli {
namespace {

/// The multipliers of `site` under `mask`: ones where it leaves the site alone.
torch::Tensor xi_of(const nn::HeadMask& mask, const nn::AttentionSite& site, const torch::Device& device) {
  const auto xi = mask.get(site.module, site.layer);
  return xi.defined() ? xi.detach().to(device, torch::kFloat).clone()
                      : torch::ones({site.heads}, torch::dtype(torch::kFloat).device(device));
}

}  // namespace

void add_study_options(CLI::App& app, StudyArgs& args) {
  app.add_option("run", args.run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", args.overrides, "key.path=value changes to the stored config (e.g. device=cpu)");
  app.add_option("--split", args.split_name, "train, val or test")->capture_default_str();
  app.add_option("--checkpoint", args.which, "best, last, epoch-N or a runner average's name")->capture_default_str();
  app.add_option("--sentences", args.sentences,
                 "the split's first N sentences only (loss and BLEU; with ablate --tokens the sentences blanked out; "
                 "default all, or 100 with --tokens)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
}

bool decoder_only(const std::string& module) { return module == nn::kDecoderSelf || module == nn::kDecoderCross; }

void check_group_name(const std::string& name, const std::string& option, const std::string& group) {
  ATTNLAB_CHECK(std::regex_match(name, std::regex("[A-Za-z0-9_-][A-Za-z0-9_.-]*")), ConfigError,
                "{} '{}': expected letters, digits, '_', '-' and '.', not first (one name under /{}, no '/')", option,
                name, group);
}

bool HeadStudy::off_in_training(const nn::AttentionSite& site, int64_t h) const {
  const auto xi = trained.mask.get(site.module, site.layer);
  return xi.defined() && xi[h].item<float>() == 0.0f;
}

nn::HeadMask HeadStudy::mask_with_off(const std::vector<Head>& off) const {
  nn::HeadMask mask = trained.mask;
  for (const auto& h : off) {
    auto xi = xi_of(mask, *h.site, device);
    xi[h.index] = 0.0f;
    mask.set(h.site->module, h.site->layer, xi);
  }
  return mask;
}

torch::nn::Module& HeadStudy::module() {
  if (lm) return *lm;
  return *setup.model;
}

double HeadStudy::loss(bool reuse_encoder) {
  torch::NoGradGuard no_grad;
  if (lm) {  // next-token cross-entropy over the scored labels
    auto sum = torch::zeros({}, torch::dtype(torch::kDouble).device(device));
    for (const auto& b : data.batches) sum += train::token_loss(lm->forward(b.tgt_in), b.tgt_out, how).to(torch::kDouble);
    return sum.item<double>() / static_cast<double>(std::max<int64_t>(data.tokens, 1));
  }
  nn::EncoderDecoder& model = setup.model;
  if (reuse_encoder && data.encoded.empty()) {
    const nn::HeadMaskScope as_trained(base());
    for (const auto& b : data.batches) data.encoded.push_back(model->encode(b.src, b.src_valid_lens));
  }
  auto sum = torch::zeros({}, torch::dtype(torch::kDouble).device(device));
  for (size_t i = 0; i < data.batches.size(); ++i) {
    const auto& b = data.batches[i];
    torch::Tensor out;  // [B, T, V]
    if (reuse_encoder) {
      const auto state = model->init_state(data.encoded[i], /*incremental=*/false);
      out = model->decode(b.tgt_in, *state);
    } else {
      out = model->forward(b.src, b.src_valid_lens, b.tgt_in);
    }
    sum += train::token_loss(out, b.tgt_out, how).to(torch::kDouble);
  }
  return sum.item<double>() / static_cast<double>(std::max<int64_t>(data.tokens, 1));
}

metrics::BleuScore HeadStudy::bleu() {
  ATTNLAB_CHECK(translates(), ConfigError, "run {} is a language model: it has no translations to score with BLEU",
                run);
  if (sentences == 0) {
    return train::score_translation(train::translate_split(setup.model, *setup.dataset, split, {})).bleu;
  }
  auto sources = setup.dataset->raw_sources(split), references = setup.dataset->raw_targets(split);
  sources.resize(static_cast<size_t>(data.sentences));
  references.resize(static_cast<size_t>(data.sentences));
  return train::score_translation(train::translate_sentences(setup.model, *setup.dataset, std::move(sources),
                                                             std::move(references), {}))
      .bleu;
}

std::vector<torch::Tensor> HeadStudy::importance(const nn::HeadMask& at) {
  nn::HeadMask mask;
  std::vector<torch::Tensor> xi, total;
  for (const auto& s : sites) {
    xi.push_back(xi_of(at, s, device).requires_grad_(true));
    total.push_back(torch::zeros({s.heads}, torch::dtype(torch::kDouble).device(device)));
    mask.set(s.module, s.layer, xi.back());
  }
  // Only xi needs a gradient: the weights' are not computed.
  std::vector<std::pair<torch::Tensor, bool>> frozen;
  for (auto& p : module().parameters()) {
    frozen.emplace_back(p, p.requires_grad());
    p.requires_grad_(false);
  }
  const auto thaw = [&] {
    for (auto& [p, was] : frozen) p.requires_grad_(was);
  };
  const nn::HeadMaskScope scope(&mask);
  try {
    for (const auto& b : data.batches) {
      auto out = lm ? lm->forward(b.tgt_in) : setup.model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      auto loss = train::token_loss(out, b.tgt_out, how);
      if (!loss.requires_grad()) continue;  // every head off: nothing depends on xi
      loss.backward();
      for (size_t i = 0; i < xi.size(); ++i) {
        if (!xi[i].grad().defined()) continue;
        total[i] += xi[i].grad().abs().to(torch::kDouble);
        xi[i].mutable_grad().zero_();
      }
    }
  } catch (...) {
    thaw();
    throw;
  }
  thaw();
  for (auto& t : total) t = (t / static_cast<double>(std::max<int64_t>(data.tokens, 1))).cpu();
  return total;
}

HeadStudy open_head_study(const std::string& command, const StudyArgs& args, const std::vector<std::string>& plugin_dirs,
                          bool quiet) {
  const std::string &run = args.run, &which = args.which, &split_name = args.split_name;
  const auto& overrides = args.overrides;
  HeadStudy s;
  s.run = run;
  s.split_name = split_name;
  s.split = parse_split(split_name);
  const auto status = results::read_isolated(run, [&] { return results::ResultsReader(run).status(); });
  ATTNLAB_CHECK(status != results::Status::Running, ResultsError,
                "run {} is still running (or died without a word): {} a finished run", run, command);
  if (status != results::Status::Completed && !quiet) {
    spdlog::warn("run {} is {}: its '{}' checkpoint is what runner {} measures", run, results::status_name(status),
                 which, command);
  }
  run::HeadMaskSpec trained_spec;  // heads the run trained without: off in every measurement
  s.setup = load_run(run, which, overrides, plugin_dirs, trained_spec);
  if (!s.setup.model) {
    s.lm = std::dynamic_pointer_cast<nn::LanguageModel>(s.setup.custom);
    if (!s.lm) require_translation_model(s.setup, run, command);  // neither: the error naming what works
  }
  torch::nn::Module& model = s.module();
  s.sites = nn::attention_sites(model);
  ATTNLAB_CHECK(!s.sites.empty(), ConfigError,
                "run {}: its model has no attention module with heads that a mask reaches (the framework's attention "
                "in the transformer encoder and decoder and the GRU-Bahdanau decoder)",
                run);
  if (!s.setup.dataset->has_split(s.split)) {
    const auto have = splits_of(*s.setup.dataset);
    const auto last = have.rfind(", ");
    throw ConfigError(fmt::format("run {}: its dataset has no {} split (it has {}); choose one with --split {}", run,
                                  split_name, have, have.empty() ? "train" : have.substr(last == std::string::npos ? 0 : last + 2)));
  }
  model.eval();
  s.device = s.setup.ctx.device;
  s.trained = run::resolve_head_mask(trained_spec, s.sites, s.device);
  for (const auto& site : s.sites) {
    for (int64_t h = 0; h < site.heads; ++h) {
      if (!s.off_in_training(site, h)) s.heads.push_back({&site, h});
    }
  }
  s.sentences = args.sentences;
  for (const auto& whole : s.setup.dataset->batches(s.split, false, 0)) {
    const int64_t left = args.sentences > 0 ? args.sentences - s.data.sentences : whole.size();
    if (left <= 0) break;
    data::Batch b = whole;
    if (left < whole.size()) {  // the first rows only (a language model's batches have no source)
      if (whole.src.defined()) b.src = whole.src.slice(0, 0, left);
      if (whole.src_valid_lens.defined()) b.src_valid_lens = whole.src_valid_lens.slice(0, 0, left);
      b.tgt_in = whole.tgt_in.slice(0, 0, left);
      b.tgt_out = whole.tgt_out.slice(0, 0, left);
      b.tgt_valid_lens = whole.tgt_valid_lens.slice(0, 0, left);
    }
    s.data.tokens += b.tgt_valid_lens.sum().item<int64_t>();
    s.data.sentences += b.size();
    s.data.batches.push_back(b.to(s.device));
  }
  ATTNLAB_CHECK(s.data.tokens > 0, ConfigError, "the {} split of run {} has no target tokens to measure a loss on",
                split_name, run);
  s.how = train::TokenLoss{.pad = s.setup.dataset->info().pad_id,
                           .probabilities = s.lm ? false : s.setup.model->decoder().outputs_probabilities(),
                           .label_smoothing = 0,
                           .reduce = train::TokenLoss::Reduce::sum};
  if (!s.trained.mask.empty() && !quiet) {
    spdlog::info("the run trained with head mask {}: those {} heads stay off", s.trained.text, s.trained.heads_off);
  }
  return s;
}

}  // namespace attnlab::cli
