// Trainer "lm": next-token cross-entropy for decoder-only language models (nn::LanguageModel, e.g.
// the gpt model plugin). Every position the dataset marks is scored: a text dataset marks them all,
// a synthetic task only its answers (<pad> in tgt_out is not scored). Training runs for epochs, or
// for max_steps optimizer steps reported every eval_every steps (one report interval is one "epoch"
// of /metrics/epoch, with train/step the steps after it), with Adam, gradient clipping and any
// learning-rate schedule (cosine with warmup, as GPT-2 and nanoGPT train); max_epochs 0 trains
// nothing and reports the model as built once (a pretrained one). Each interval records
// train/{loss, perplexity, tokens_per_s, seconds, step} and val/{loss, perplexity, accuracy} on up to
// eval_batches validation batches. With head_scores_every it scores every head as `runner heads`
// does at step 0 and every N steps (/head_scores/training/step_<s>), and the first-token mass on
// validation rows too (val_first_token_mass). It is the framework's epoch loop
// (train/epoch_loop.hpp): checkpoints and bit-exact --resume (the data order is a function of the
// seed and the step), torchrun data parallelism, CUDA graphs and bf16 as the seq2seq trainer has them.
#include <attnlab/config/binding.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/generate.hpp>
#include <attnlab/train/head_scores.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/schedule.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>

#include <fmt/format.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "../common/token_hooks.hpp"
#include "training_scores.hpp"

namespace {
using namespace attnlab;

struct Config : train::GraphConfig, train::LoopConfig {
  int64_t max_epochs = 10;
  int64_t max_steps = 0;
  int64_t eval_every = 100;
  int64_t eval_batches = 20;
  double lr = 1e-3;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.99;
  double gradient_clip = 1.0;
  bool validate = true;
  config::Node schedule;
  int64_t head_scores_every = 0;
  int64_t head_scores_length = 0;
  int64_t head_scores_sequences = 16;
  int64_t in_context_early = 0, in_context_late = 0;  // positions from 1; both 0 = no score
  config::Node sample_prompts;  // texts continued after training into /generations/sample-<i>
  int64_t sample_tokens = 200;
  double sample_temperature = 0.8;
  int64_t sample_top_k = 0;
  int64_t sample_seed = 0;
};

trainers::TrainingScoresConfig scores_config(const Config& c) {
  return {.every = c.head_scores_every, .length = c.head_scores_length, .sequences = c.head_scores_sequences};
}

/// Report intervals of a step-based run: ceil(max_steps / eval_every).
int64_t intervals(const Config& c) { return (c.max_steps + c.eval_every - 1) / c.eval_every; }

std::shared_ptr<nn::LanguageModel> language_model(const train::TrainContext& ctx) {
  ATTNLAB_CHECK(ctx.custom != nullptr, ConfigError,
                "it trains a language model: model: {{plugin: gpt, ...}}, found {}",
                ctx.model ? "an encoder + decoder model" : "no model");
  auto lm = std::dynamic_pointer_cast<nn::LanguageModel>(ctx.custom);
  ATTNLAB_CHECK(lm != nullptr, ConfigError,
                "it trains a language model (nn::LanguageModel, attnlab/nn/language_model.hpp, e.g. model: {{plugin: "
                "gpt}}), found a model plugin that is not one");
  return lm;
}

/// The lm trainer's part of the epoch loop.
class LmHooks final : public trainers::TokenHooks {
 public:
  LmHooks(const Config& c, train::TrainContext& ctx, std::shared_ptr<nn::LanguageModel> lm)
      : TokenHooks(ctx, ctx.dataset->info().pad_id, c.cuda_graph_pad),
        c_(c),
        lm_(std::move(lm)),
        objective_{.pad = ctx.dataset->info().pad_id},
        scores_(scores_config(c), *lm_, *ctx.dataset, ctx.results, ctx.device) {}

  torch::nn::Module& module() override { return *lm_; }

  /// Epoch mode: the dataset's epoch (seed + epoch). Step mode: interval k holds steps
  /// (k - 1) eval_every .. k eval_every - 1 (up to max_steps); step s is batch s - start(e) of
  /// training epoch e, the epoch that holds it, drawn with seed + 1 + e. A function of the seed and
  /// the step alone, so that a resumed run sees what the first would have.
  std::vector<data::Batch> batches(const train::TrainContext& ctx, int64_t interval) override {
    if (c_.max_steps == 0) return EpochHooks::batches(ctx, interval);
    std::vector<data::Batch> out;
    const int64_t begin = (interval - 1) * c_.eval_every;
    const int64_t end = std::min(interval * c_.eval_every, c_.max_steps);
    for (int64_t s = begin; s < end; ++s) out.push_back(batch_at(s));
    return out;
  }

  void begin_epoch(int64_t interval) override {
    TokenHooks::begin_epoch(interval);
    if (c_.max_steps > 0) step_ = (interval - 1) * c_.eval_every;
    scores_.begin(step_);
  }

  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch& rows,
                  const train::StepShare& share) override {
    TokenHooks::after_step(outs, rows, share);
    ++step_;
    scores_.after_step(step_);
  }

  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare&, bool graphed) override {
    const auto b = on_device(rows, graphed);
    return {b.tgt_in, b.tgt_out};
  }

  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool summed) override {
    train::TokenLoss how = objective_;
    if (summed) how.reduce = train::TokenLoss::Reduce::sum;
    return {train::token_loss(lm_->forward(in[0]), in[1], how)};  // logits [B, T, V]
  }

  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    const auto sums = train_sums(end);
    r.train["loss"] = sums.loss;
    r.train["perplexity"] = std::exp(std::min(sums.loss, 700.0));
    const double seconds = std::max(sums.seconds - scores_.take_seconds(), 0.0);  // the steps' time, not the scoring's
    r.train["tokens_per_s"] = sums.tokens / std::max(seconds, 1e-9);
    r.train["seconds"] = seconds;
    if (c_.max_steps > 0) r.train["step"] = static_cast<double>(std::min(r.epoch * c_.eval_every, c_.max_steps));
    if (c_.validate && ctx_.dataset->has_split(data::Split::Val)) validate(r.val);
  }

  /// max_epochs 0: the one report, the validation metrics of the model as built (a pretrained one).
  train::EpochReport measure_untrained() {
    const auto start = std::chrono::steady_clock::now();
    train::EpochReport r{.epoch = 0, .train = {{"step", 0.0}}, .val = {}, .seconds = 0.0};
    if (ctx_.dataset->has_split(data::Split::Val)) validate(r.val);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

 private:
  /// Step s's batch (step mode), from the cached training epoch that holds it.
  data::Batch batch_at(int64_t s) {
    int64_t start = 0;
    for (int64_t e = 0;; ++e) {
      if (static_cast<int64_t>(epoch_sizes_.size()) <= e) {
        epoch_sizes_.push_back(static_cast<int64_t>(epoch(e).size()));
        ATTNLAB_CHECK(epoch_sizes_.back() > 0, DataError, "lm: the dataset's training split has no batches");
      }
      if (s < start + epoch_sizes_[e]) return epoch(e)[s - start];
      start += epoch_sizes_[e];
    }
  }

  const std::vector<data::Batch>& epoch(int64_t e) {
    if (cached_epoch_ != e) {
      cached_ = ctx_.dataset->batches(data::Split::Train, true, ctx_.seed + 1 + static_cast<uint64_t>(e));
      cached_epoch_ = e;
    }
    return cached_;
  }

  /// val/loss, val/perplexity and val/accuracy (the argmax is the label) over the first
  /// eval_batches validation batches (all with 0), sharded over the ranks of a data-parallel run.
  void validate(std::map<std::string, double>& out) {
    lm_->eval();
    torch::NoGradGuard no_grad;
    train::TokenLoss sum = objective_;
    sum.reduce = train::TokenLoss::Reduce::sum;
    auto sums = torch::zeros({2}, torch::dtype(torch::kDouble).device(ctx_.device));  // loss, correct
    in_context_ = torch::zeros({2, 2}, torch::dtype(torch::kDouble).device(ctx_.device));  // [early, late] x [loss, n]
    int64_t tokens = 0, seen = 0;
    train::Distributed* dist = ctx_.distributed;
    for (const auto& global : ctx_.dataset->batches(data::Split::Val, false, 0)) {
      if (c_.eval_batches > 0 && seen++ >= c_.eval_batches) break;
      if (dist != nullptr && dist->loss_scale(global) == 0) continue;  // none of this batch is ours
      const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
      auto b = cpu_batch.to(ctx_.device, true);
      auto logits = lm_->forward(b.tgt_in);  // [B, T, V]
      sums[0] += train::token_loss(logits, b.tgt_out, sum).to(torch::kDouble);
      sums[1] += (logits.argmax(-1).eq(b.tgt_out) & b.tgt_out.ne(objective_.pad)).sum().to(torch::kDouble);
      if (in_context()) add_in_context(logits, b.tgt_out);
      tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();
    }
    lm_->train();
    const auto host = sums.cpu();
    std::vector<double> totals = {host[0].item<double>(), host[1].item<double>(), static_cast<double>(tokens)};
    if (dist != nullptr) totals = dist->sum(totals);
    if (totals[2] == 0) return;  // an empty split has no loss
    const double loss = totals[0] / totals[2];
    out["loss"] = loss;
    out["perplexity"] = std::exp(std::min(loss, 700.0));
    out["accuracy"] = totals[1] / totals[2];
    if (in_context()) {
      const auto at = in_context_.cpu();
      std::vector<double> pos = {at[0][0].item<double>(), at[0][1].item<double>(), at[1][0].item<double>(),
                                 at[1][1].item<double>()};
      if (dist != nullptr) pos = dist->sum(pos);
      if (pos[1] > 0 && pos[3] > 0) {
        out["loss_early"] = pos[0] / pos[1];
        out["loss_late"] = pos[2] / pos[3];
        out["in_context_score"] = out["loss_late"] - out["loss_early"];
      }
    }
  }

  bool in_context() const { return c_.in_context_late > 0; }

  /// Adds the loss and the count of the labels scored at in_context_early and in_context_late
  /// (positions from 1) to in_context_ [2, 2].
  void add_in_context(const torch::Tensor& logits, const torch::Tensor& labels) {
    const int64_t pad = objective_.pad;
    for (int k = 0; k < 2; ++k) {
      const int64_t t = (k == 0 ? c_.in_context_early : c_.in_context_late) - 1;
      if (t >= labels.size(1)) continue;
      train::TokenLoss sum = objective_;
      sum.reduce = train::TokenLoss::Reduce::sum;
      const auto y = labels.narrow(1, t, 1);  // [B, 1]
      in_context_[k][0] += train::token_loss(logits.narrow(1, t, 1), y, sum).to(torch::kDouble);
      in_context_[k][1] += y.ne(pad).sum().to(torch::kDouble);
    }
  }

  const Config& c_;
  std::shared_ptr<nn::LanguageModel> lm_;
  const train::TokenLoss objective_;
  std::vector<int64_t> epoch_sizes_;
  std::vector<data::Batch> cached_;
  int64_t cached_epoch_ = -1;
  int64_t step_ = 0;  // optimizer steps done (step mode)
  torch::Tensor in_context_;  // validation: [early, late] x [summed loss, scored labels]
  trainers::TrainingScores scores_;
};

class LmTrainer final : public train::Trainer {
 public:
  LmTrainer(const Config& c, train::LrSchedule schedule) : c_(c), schedule_(schedule) {}

  int64_t max_epochs() const override { return c_.max_steps > 0 ? intervals(c_) : c_.max_epochs; }
  bool can_resume() const override { return c_.checkpoints; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    auto lm = language_model(ctx);
    if (c_.sample_prompts.size() > 0) {
      const auto* text = dynamic_cast<const data::LanguageModelData*>(ctx.dataset);
      ATTNLAB_CHECK(text != nullptr, ConfigError,
                    "sample_prompts: the dataset cannot turn a prompt into tokens (it does not implement "
                    "data::LanguageModelData)");
      for (size_t i = 0; i < c_.sample_prompts.size(); ++i) {
        const auto ids = text->encode_prompt(c_.sample_prompts[i].str());  // DataError naming a bad character
        ATTNLAB_CHECK(!ids.empty(), ConfigError, "sample_prompts[{}] is empty: give at least one character", i);
        const int64_t total = static_cast<int64_t>(ids.size()) + c_.sample_tokens;
        ATTNLAB_CHECK(lm->max_positions() == 0 || total <= lm->max_positions(), ConfigError,
                      "sample_prompts[{}]: its {} tokens and sample_tokens {} make {} positions, beyond the {} of the "
                      "model's absolute positional encoding",
                      i, ids.size(), c_.sample_tokens, total, lm->max_positions());
      }
    }
    ATTNLAB_CHECK(ctx.dataset != nullptr && ctx.dataset->info().tgt_vocab_size > 0, ConfigError,
                  "it trains on token sequences, but the dataset has no vocabulary");
    const auto info = ctx.dataset->info();
    ATTNLAB_CHECK(info.tgt_vocab_size == lm->vocab_size(), ConfigError,
                  "the model predicts {} classes, but the dataset has {} tokens", lm->vocab_size(),
                  info.tgt_vocab_size);
    ATTNLAB_CHECK(lm->max_positions() == 0 || info.num_steps <= lm->max_positions(), ConfigError,
                  "the dataset's sequences have {} positions, beyond the {} of the model's absolute positional "
                  "encoding: raise the model's max_len, shorten the dataset's block_size, or use a relative scorer "
                  "(rope, alibi, t5_bias) or none (positional_encoding: none)",
                  info.num_steps, lm->max_positions());
    nn::check_causal(*lm, ctx.device, "the model");
    ATTNLAB_CHECK(c_.in_context_late <= info.num_steps, ConfigError,
                  "in_context_late {}: the dataset's sequences have {} positions", c_.in_context_late, info.num_steps);
    if (c_.head_scores_every > 0) {
      const int64_t length = trainers::head_scores_length(scores_config(c_), *ctx.dataset);
      ATTNLAB_CHECK(lm->max_positions() == 0 || 2 * length <= lm->max_positions(), ConfigError,
                    "head_scores_length {}: the head scores' sequences of 2 x {} tokens are beyond the {} positions of "
                    "the model's absolute positional encoding; give head_scores_length {} at most",
                    length, length, lm->max_positions(), lm->max_positions() / 2);
      const auto ids = train::ordinary_tokens(*ctx.dataset, lm->vocab_size());
      ATTNLAB_CHECK(ids.high - ids.low >= 2, ConfigError,
                    "head_scores_every: the vocabulary has {} ordinary tokens ({}), too few to draw random sequences from",
                    std::max<int64_t>(ids.high - ids.low, 0), ids.text);
    }
    train::check_graph_options(c_, ctx);
  }

  int64_t num_parameters(const train::TrainContext& ctx) const override {
    return nn::count_parameters(*language_model(ctx));
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    auto lm = language_model(ctx);
    if (max_epochs() == 0) {  // nothing to train (no schedule, no optimizer): measure, write no checkpoint
      if (ctx.on_epoch) ctx.on_epoch(LmHooks(c_, ctx, lm).measure_untrained());
      write_samples(ctx, *lm);
      return train::FitResult::Completed;
    }
    train::LrSchedule schedule = schedule_;
    // Epoch mode: a cosine schedule without total_steps ends with the run (one epoch's batches
    // counted; only then, since a streaming dataset's epoch can be large).
    if (c_.max_steps == 0 && schedule.type == train::LrSchedule::Type::Cosine && schedule.total_steps == 0) {
      const auto n = static_cast<int64_t>(ctx.dataset->batches(data::Split::Train, false, 0).size());
      train::fill_total_steps(schedule, std::max<int64_t>(n * c_.max_epochs, schedule.warmup_steps + 1));
    }
    train::FusedAdam opt(lm->parameters(),
                         torch::optim::AdamOptions(schedule.at(1)).betas({c_.adam_beta1, c_.adam_beta2}));
    LmHooks hooks(c_, ctx, lm);
    const auto result = train::run_epochs(ctx, hooks, &opt,
                             {.who = "lm",
                              .max_epochs = max_epochs(),
                              .loop = c_,
                              .step = train::step_options(c_, c_.gradient_clip, ctx.precision),
                              .schedule = schedule,
                              .record_lr = true});
    if (result == train::FitResult::Completed) write_samples(ctx, *lm);
    return result;
  }

 private:
  /// After a completed run: each of sample_prompts continued by the final weights, stored as
  /// /generations/sample-<i> (from 1), as `runner generate` stores its texts.
  void write_samples(train::TrainContext& ctx, nn::LanguageModel& lm) const {
    if (ctx.results == nullptr || c_.sample_prompts.size() == 0) return;
    const auto& text = dynamic_cast<const data::LanguageModelData&>(*ctx.dataset);  // check() made sure
    train::GenerateOptions o;
    o.tokens = c_.sample_tokens;
    o.temperature = c_.sample_temperature;
    o.top_k = c_.sample_top_k;
    for (size_t i = 0; i < c_.sample_prompts.size(); ++i) {
      o.seed = static_cast<uint64_t>(c_.sample_seed) + i;  // prompt i's own sampler stream
      const std::string prompt = c_.sample_prompts[i].str();
      const auto g = train::generate(lm, text.encode_prompt(prompt), o, ctx.device);
      const std::vector<int64_t> continuation(g.ids.begin() + g.prompt_tokens, g.ids.end());
      train::write_generation(*ctx.results, fmt::format("sample-{}", i + 1), g, o,
                              {prompt, text.decode(continuation), text.decode(g.ids)}, "final", ctx.device);
    }
    ctx.results->flush();
  }

  Config c_;
  train::LrSchedule schedule_;
};

const config::Binding<Config>& binding() {
  static const auto b = train::with_graph_options(
      config::Binding<Config>()
          .option("max_steps", &Config::max_steps,
                  "optimizer steps to train, reported every eval_every steps (each report is one entry of the "
                  "results' epoch series); 0 = train max_epochs whole epochs instead",
                  {.min = 0})
          .option("max_epochs", &Config::max_epochs,
                  "epochs to train when max_steps is 0; 0 = train nothing: one report of the validation metrics of "
                  "the model as built (a pretrained one, model.pretrained), no checkpoint", {.min = 0})
          .option("eval_every", &Config::eval_every,
                  "with max_steps: steps between reports (train and validation metrics, checkpoints, patience)",
                  {.min = 1})
          .option("eval_batches", &Config::eval_batches,
                  "validation batches per report (the first ones, always the same); 0 = the whole split", {.min = 0})
          .option("lr", &Config::lr, "Adam learning rate (the schedule's peak)", {.min = 0.0})
          .option("adam_beta1", &Config::adam_beta1, "Adam's beta1", {.min = 0.0, .max = 0.999999})
          .option("adam_beta2", &Config::adam_beta2, "Adam's beta2 (nanoGPT's 0.99 for small models)",
                  {.min = 0.0, .max = 0.999999})
          .option("gradient_clip", &Config::gradient_clip, "clip gradients to this global L2 norm (0 = off)",
                  {.min = 0.0})
          .option("validate", &Config::validate, "compute the validation metrics at every report")
          .option("head_scores_every", &Config::head_scores_every,
                  "with max_steps: score every head as runner heads does (previous-token, duplicate-token, induction, "
                  "first-token mass) at step 0 and every N steps, into /head_scores/training/step_<s>; 0 = never",
                  {.min = 0})
          .option("head_scores_length", &Config::head_scores_length,
                  "random tokens before the repeat in the head scores' sequences (2 x this long); 0 = half the "
                  "dataset's sequence length",
                  {.min = 0})
          .option("in_context_early", &Config::in_context_early,
                  "with in_context_late: a position (from 1) early in the context; val/in_context_score is the val "
                  "loss at in_context_late minus the loss here (Olsson et al. 2022: tokens 500 and 50)",
                  {.min = 0})
          .option("in_context_late", &Config::in_context_late,
                  "a position (from 1) late in the context for val/in_context_score (also val/loss_early, "
                  "val/loss_late); 0 = no score",
                  {.min = 0})
          .option("head_scores_sequences", &Config::head_scores_sequences,
                  "random sequences the head scores are averaged over", {.min = 1, .max = 100000})
          .node("sample_prompts", &Config::sample_prompts, config::Type::List, "[]",
                "texts the trained model continues when the run completes (its final weights), stored as "
                "/generations/sample-<i> as runner generate stores them (e.g. [\"I am \", \"The \"])")
          .option("sample_tokens", &Config::sample_tokens, "tokens generated after each sample prompt",
                  {.min = 1, .max = 1000000})
          .option("sample_temperature", &Config::sample_temperature,
                  "the samples' temperature (0 = greedy)", {.min = 0.0, .max = 100.0})
          .option("sample_top_k", &Config::sample_top_k, "sample among the k most likely tokens only (0 = all)",
                  {.min = 0})
          .option("sample_seed", &Config::sample_seed, "the first sample's sampler seed (sample i: sample_seed + i - 1)",
                  {.min = 0})
          .node("schedule", &Config::schedule, config::Type::Map, "{type: constant}",
                "learning-rate schedule: {type: constant|linear_warmup|inverse_sqrt|cosine, warmup_steps: N, "
                "total_steps: T, min_lr: m} (attnlab/train/schedule.hpp); cosine ends at max_steps unless told")
          .include(train::checkpoint_options("lowest validation loss", {.checkpoints = true}))
          .include(train::patience_option("val/loss (reports, not epochs, with max_steps)")),
      /*pads=*/true);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  train::check_loop_options(c, o);
  const auto& b = binding();
  if (c.max_steps > 0 && o.given(b.name_of(&Config::max_epochs))) {
    b.fail(o, &Config::max_epochs, "give max_steps or max_epochs, not both");
  }
  if (c.max_steps == 0 && c.head_scores_every > 0) {
    b.fail(o, &Config::head_scores_every, "head_scores_every counts optimizer steps of a max_steps run; give max_steps");
  }
  if ((c.in_context_late > 0) != (c.in_context_early > 0) || (c.in_context_late > 0 && c.in_context_early >= c.in_context_late)) {
    b.fail(o, &Config::in_context_late,
           fmt::format("in_context_early {} and in_context_late {}: give both, the early position before the late "
                       "one (positions from 1)",
                       c.in_context_early, c.in_context_late));
  }
  if (c.max_steps == 0 && o.given(b.name_of(&Config::eval_every))) {
    b.fail(o, &Config::eval_every, "eval_every counts steps between reports of a max_steps run; without "
                                   "max_steps every epoch is reported");
  }
  const int64_t total = c.max_steps > 0 ? c.max_steps : -1;  // epoch mode: set in fit()
  return std::make_shared<LmTrainer>(c, train::parse_schedule(c.schedule, c.lr, o.owner(), total));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "lm",
               "next-token cross-entropy for decoder-only language models: steps or epochs, Adam, cosine schedule, "
               "perplexity, resumable checkpoints",
               schema, make)
