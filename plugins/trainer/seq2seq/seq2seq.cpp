// Trainer "seq2seq": teacher-forced cross-entropy (ignoring <pad>), Adam, gradient clipping by
// global norm, per-epoch train/validation loss and tokens/s (d2l 1.0.3's Trainer + Seq2Seq), with
// a learning-rate schedule (recorded per step as /metrics/step/lr), and checkpoints after every
// epoch (last.pt, best.pt by validation loss) that a resumed run continues from exactly: the
// data order depends only on (seed, epoch), and model, Adam, schedule position and RNG states are
// restored. With keep_checkpoints: K it also keeps the weights of the last K epochs
// (epoch-<N>.pt), which `runner average RUN.h5 --last K` averages. With val_bleu it translates the
// validation split greedily after every epoch (val/bleu, sacreBLEU); best_by: bleu picks best.pt by
// it (the state's best_metric is then -BLEU, so lower stays better), and patience: P stops a run
// whose best_by metric has not improved for P epochs. With rdrop_alpha: α > 0 it trains R-Drop's
// objective (Liang et al. 2021; train::rdrop_loss): each batch twice, under independent dropout
// masks, plus α/4 · the symmetric KL of the two passes. Each step goes through train::TrainStep: on
// CUDA the whole step is a replayed CUDA graph per batch shape (cuda_graphs: auto), the batches
// padded to a few shapes (cuda_graph_pad), under the experiment's precision.
#include <attnlab/config/binding.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/schedule.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>
#include <attnlab/train/translate.hpp>

#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "../common/token_hooks.hpp"

namespace {
using namespace attnlab;

struct Config : train::GraphConfig, train::LoopConfig {
  int64_t max_epochs = 30;
  double lr = 0.001;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double gradient_clip = 1.0;
  double label_smoothing = 0;
  double rdrop_alpha = 0;
  bool validate = true;
  config::Node schedule;
  bool val_bleu = false;
  bool best_by_bleu = false;
};

/// The seq2seq trainer's part of the epoch loop (attnlab/train/epoch_loop.hpp): teacher-forced
/// steps on token batches (padded to bucket shapes under CUDA graphs), the epoch's train loss and
/// tokens/s, validation loss and BLEU, best.pt by val/loss or val/bleu.
class Seq2SeqHooks final : public trainers::TokenHooks {
 public:
  Seq2SeqHooks(const Config& c, train::TrainContext& ctx)
      : TokenHooks(ctx, ctx.dataset->info().pad_id, c.cuda_graph_pad),
        c_(c),
        model_(ctx.model),
        objective_{.pad = ctx.dataset->info().pad_id,
                   .probabilities = model_->decoder().outputs_probabilities(),
                   .label_smoothing = c.label_smoothing} {}

  torch::nn::Module& module() override { return *model_; }

  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare&, bool graphed) override {
    const auto b = on_device(rows, graphed);
    return {b.src, b.src_valid_lens, b.tgt_in, b.tgt_out};
  }

  /// The training objective of one batch {src, src_valid_lens, tgt_in, tgt_out}: the mean token
  /// loss (`summed`: the sum), or with rdrop_alpha > 0 R-Drop's, the batch run twice as one of twice
  /// the rows, so that every pair meets two independent dropout masks.
  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool summed) override {
    const train::TokenLoss how = summed ? sum_of(objective_) : objective_;
    if (c_.rdrop_alpha == 0) return {train::token_loss(model_->forward(in[0], in[1], in[2]), in[3], how)};  // [B, T, V]
    const auto twice = [](const torch::Tensor& t) { return torch::cat({t, t}); };
    const auto out = model_->forward(twice(in[0]), twice(in[1]), twice(in[2]));  // [2B, T, V]
    const auto halves = out.chunk(2, 0);
    return {train::rdrop_loss(halves[0], halves[1], in[3], how, c_.rdrop_alpha)};
  }

  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    const auto sums = train_sums(end);
    r.train["loss"] = sums.loss;
    r.train["tokens_per_s"] = sums.tokens / std::max(sums.seconds, 1e-9);
    r.train["seconds"] = sums.seconds;
    const bool has_val = c_.validate && ctx_.dataset->has_split(data::Split::Val);
    if (has_val) validation_loss(r.val);
    if (has_val && val_bleu()) r.val["bleu"] = validation_bleu();
  }

  train::Selection selection(const train::EpochReport& r) const override {
    if (!c_.best_by_bleu || !r.val.count("bleu")) return EpochHooks::selection(r);
    return {"val/bleu", r.val.at("bleu"), /*higher_is_better=*/true};
  }

 private:
  bool val_bleu() const { return c_.val_bleu || c_.best_by_bleu; }

  static train::TokenLoss sum_of(train::TokenLoss how) {
    how.reduce = train::TokenLoss::Reduce::sum;
    return how;
  }

  /// val/bleu: sacreBLEU of greedy translations of the validation split, in eval mode. Every rank
  /// of a data-parallel run translates the whole split with the same weights, so all agree.
  double validation_bleu() {
    model_->eval();
    const auto t = train::translate_split(model_, *ctx_.dataset, data::Split::Val, {});
    model_->train();
    return train::score_translation(t).bleu.score;
  }

  /// val/loss: the cross-entropy without label smoothing, comparable across runs and what best.pt
  /// is chosen by; with smoothing also val/smoothed_loss, the training objective on this split.
  void validation_loss(std::map<std::string, double>& out) {
    model_->eval();
    torch::NoGradGuard no_grad;
    const bool smoothing = objective_.label_smoothing > 0;
    train::TokenLoss plain = sum_of(objective_);
    plain.label_smoothing = 0;
    auto sums = torch::zeros({2}, torch::dtype(torch::kDouble).device(ctx_.device));  // plain, smoothed
    int64_t tokens = 0;
    train::Distributed* dist = ctx_.distributed;
    for (const auto& global : ctx_.dataset->batches(data::Split::Val, false, 0)) {
      if (dist != nullptr && dist->loss_scale(global) == 0) continue;  // none of this batch is ours
      const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
      auto b = cpu_batch.to(ctx_.device, true);
      auto out = model_->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      sums[0] += train::token_loss(out, b.tgt_out, plain).to(torch::kDouble);
      if (smoothing) sums[1] += train::token_loss(out, b.tgt_out, sum_of(objective_)).to(torch::kDouble);
      tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();
    }
    model_->train();
    const auto host = sums.cpu();
    double plain_total = host[0].item<double>(), smoothed_total = host[1].item<double>();
    double count = static_cast<double>(tokens);
    if (dist != nullptr) {
      const auto all = dist->sum({plain_total, smoothed_total, count});
      plain_total = all[0];
      smoothed_total = all[1];
      count = all[2];
    }
    // An empty split has no loss (not NaN: the runner would call a NaN loss divergence).
    if (count == 0) return;
    out["loss"] = plain_total / count;
    if (smoothing) out["smoothed_loss"] = smoothed_total / count;
  }

  const Config& c_;
  nn::EncoderDecoder model_;
  const train::TokenLoss objective_;
};

class Seq2SeqTrainer final : public train::Trainer {
 public:
  Seq2SeqTrainer(const Config& c, train::LrSchedule schedule) : c_(c), schedule_(schedule) {}

  int64_t max_epochs() const override { return c_.max_epochs; }
  bool can_resume() const override { return c_.checkpoints; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(ctx.model, ConfigError,
                  "it trains an encoder + decoder: the experiment needs model: {{encoder: ..., decoder: ...}}");
    ATTNLAB_CHECK(ctx.dataset != nullptr && ctx.dataset->info().tgt_vocab_size > 0, ConfigError,
                  "it trains on token sequences, but the dataset has no target vocabulary");
    const bool val_bleu = c_.val_bleu || c_.best_by_bleu;
    ATTNLAB_CHECK(!val_bleu || ctx.dataset->has_split(data::Split::Val), ConfigError,
                  "{} translates the validation split, but the dataset has none",
                  c_.best_by_bleu ? "best_by: bleu" : "val_bleu: true");
    ATTNLAB_CHECK(!val_bleu || c_.validate, ConfigError, "{} is a validation metric, but validate: false",
                  c_.best_by_bleu ? "best_by: bleu" : "val_bleu: true");
    train::check_graph_options(c_, ctx);
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    train::FusedAdam opt(ctx.model->parameters(),
                         torch::optim::AdamOptions(schedule_.at(1)).betas({c_.adam_beta1, c_.adam_beta2}));
    Seq2SeqHooks hooks(c_, ctx);
    return train::run_epochs(ctx, hooks, &opt,
                             {.who = "seq2seq",
                              .max_epochs = c_.max_epochs,
                              .loop = c_,
                              .step = train::step_options(c_, c_.gradient_clip, ctx.precision),
                              .schedule = schedule_,
                              .record_lr = true});
  }

 private:
  Config c_;
  train::LrSchedule schedule_;
};

const config::Binding<Config>& binding() {
  static const auto b = train::with_graph_options(
      config::Binding<Config>()
          .option("max_epochs", &Config::max_epochs, "epochs to train", {.min = 1})
          .option("lr", &Config::lr, "Adam learning rate (the schedule's base rate)", {.min = 0.0})
          .option("adam_beta1", &Config::adam_beta1, "Adam's beta1 (PyTorch's default)", {.min = 0.0, .max = 0.999999})
          .option("adam_beta2", &Config::adam_beta2,
                  "Adam's beta2 (PyTorch's default 0.999; Vaswani et al. and Xiong et al. use 0.98)",
                  {.min = 0.0, .max = 0.999999})
          .option("gradient_clip", &Config::gradient_clip, "clip gradients to this global L2 norm (0 = off)",
                  {.min = 0.0})
          .option("label_smoothing", &Config::label_smoothing,
                  "ε of label smoothing in the training loss (0 = off; 0.1 in Vaswani et al.): train/loss is the "
                  "smoothed objective, val/loss stays plain cross-entropy (best.pt is chosen by it) and "
                  "val/smoothed_loss is the objective on the validation split",
                  {.min = 0.0, .max = 0.99})
          .option("rdrop_alpha", &Config::rdrop_alpha,
                  "R-Drop's α (Liang et al. 2021; 5 on IWSLT'14 De-En): every batch runs twice, as one batch of "
                  "twice the rows (twice the compute), and the loss adds α/4 · the symmetric KL divergence of the two "
                  "passes' output distributions to the mean of their token losses, pulling together what the "
                  "model's dropout pulls apart; train/loss is that objective (0 = off; needs dropout to do anything)",
                  {.min = 0.0})
          .option("validate", &Config::validate, "compute the validation loss after every epoch")
          .node("schedule", &Config::schedule, config::Type::Map, "{type: constant}",
                "learning-rate schedule: {type: constant|linear_warmup|inverse_sqrt, warmup_steps: N, d_model: D, "
                "factor: F} (attnlab/train/schedule.hpp)")
          .include(train::checkpoint_options("lowest validation loss", {.checkpoints = true}))
          .option("val_bleu", &Config::val_bleu,
                  "translate the validation split greedily after every epoch and record val/bleu (sacreBLEU)")
          .choice("best_by", &Config::best_by_bleu, {{"loss", false}, {"bleu", true}},
                  "what picks best.pt (and what patience watches): the lowest val/loss, or the highest val/bleu "
                  "(turns val_bleu on)")
          .include(train::patience_option("the best_by metric")),
      /*pads=*/true);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  train::check_loop_options(c, o);
  return std::make_shared<Seq2SeqTrainer>(c, train::parse_schedule(c.schedule, c.lr, o.owner()));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq",
               "teacher-forced cross-entropy with Adam, gradient clipping, LR schedules and resumable checkpoints",
               schema, make)
