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
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/schedule.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>
#include <attnlab/train/translate.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>

namespace {
using namespace attnlab;

struct Config : train::GraphConfig {
  int64_t max_epochs = 30;
  double lr = 0.001;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double gradient_clip = 1.0;
  double label_smoothing = 0;
  double rdrop_alpha = 0;
  bool validate = true;
  config::Node schedule;
  bool checkpoints = true;
  int64_t keep_checkpoints = 0;
  bool val_bleu = false;
  bool best_by_bleu = false;
  int64_t patience = 0;
};

class Seq2SeqTrainer final : public train::Trainer {
 public:
  Seq2SeqTrainer(const Config& c, train::LrSchedule schedule)
      : max_epochs_(c.max_epochs),
        clip_(c.gradient_clip),
        smoothing_(c.label_smoothing),
        rdrop_(c.rdrop_alpha),
        betas_(c.adam_beta1, c.adam_beta2),
        validate_(c.validate),
        checkpoints_(c.checkpoints),
        keep_(c.keep_checkpoints),
        by_bleu_(c.best_by_bleu),
        val_bleu_(c.val_bleu || by_bleu_),
        patience_(c.patience),
        graphs_(c),
        schedule_(schedule) {}

  int64_t max_epochs() const override { return max_epochs_; }
  bool can_resume() const override { return checkpoints_; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(ctx.model, ConfigError,
                  "it trains an encoder + decoder: the experiment needs model: {{encoder: ..., decoder: ...}}");
    ATTNLAB_CHECK(ctx.dataset != nullptr && ctx.dataset->info().tgt_vocab_size > 0, ConfigError,
                  "it trains on token sequences, but the dataset has no target vocabulary");
    ATTNLAB_CHECK(!val_bleu_ || ctx.dataset->has_split(data::Split::Val), ConfigError,
                  "{} translates the validation split, but the dataset has none",
                  by_bleu_ ? "best_by: bleu" : "val_bleu: true");
    ATTNLAB_CHECK(!val_bleu_ || validate_, ConfigError, "{} is a validation metric, but validate: false",
                  by_bleu_ ? "best_by: bleu" : "val_bleu: true");
    train::check_graph_options(graphs_, ctx);
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    auto& model = ctx.model;
    const auto pad = ctx.dataset->info().pad_id;
    const train::TokenLoss objective{
        .pad = pad, .probabilities = model->decoder().outputs_probabilities(), .label_smoothing = smoothing_};
    train::FusedAdam opt(model->parameters(), torch::optim::AdamOptions(schedule_.at(1)).betas(betas_));
    auto params = model->parameters();
    const bool checkpointing = checkpoints_ && !ctx.checkpoint_dir.empty();
    const auto last_path = (std::filesystem::path(ctx.checkpoint_dir) / "last.pt").string();
    const auto best_path = (std::filesystem::path(ctx.checkpoint_dir) / "best.pt").string();
    train::TrainingState st;
    if (ctx.resume) {
      st = train::load_checkpoint(last_path, *model, &opt);
      if (ctx.results != nullptr) ctx.results->truncate_metrics(st.metric_rows);
      if (ctx.writes_files()) spdlog::info("resuming after epoch {} (step {}) from {}", st.epoch, st.step, last_path);
    }
    // Data-parallel (torchrun): every rank starts from rank 0's weights, trains on its shard of
    // each global batch, and the reducer averages the gradients during backward.
    train::Distributed* dist = ctx.distributed;
    if (dist != nullptr) dist->attach(params, model->buffers());
    // Forward, loss, backward, clipping and Adam: eagerly, or as a replayed CUDA graph per
    // (padded) batch shape (attnlab/train/train_step.hpp).
    train::TrainStep stepper(train::step_options(graphs_, clip_, ctx.precision), ctx.device, opt, params, "seq2seq",
                             dist != nullptr);
    int64_t bucket_rows = 0;  // with graphs: every batch padded to the most rows seen
    for (int64_t epoch = st.epoch + 1; epoch <= max_epochs_; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      model->train();
      auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));  // on device, read once
      int64_t tokens = 0;
      for (const auto& global : ctx.dataset->batches(data::Split::Train, true, ctx.seed + epoch)) {
        if (dist != nullptr ? dist->should_stop(ctx.stopped()) : ctx.stopped()) return train::FitResult::Interrupted;
        const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
        data::Batch shaped = cpu_batch;
        if (stepper.graphed()) {
          bucket_rows = std::max(bucket_rows, cpu_batch.size());
          shaped = data::pad_to_bucket(cpu_batch, bucket_rows, graphs_.cuda_graph_pad, pad);
        }
        auto b = shaped.to(ctx.device, true);
        const std::vector<torch::Tensor> inputs{b.src, b.src_valid_lens, b.tgt_in, b.tgt_out};
        const double lr = schedule_.at(++st.step);
        int64_t n = 0;  // tokens the loss counts
        if (dist == nullptr) {
          const auto outs = stepper.run(inputs, lr, [&](const std::vector<torch::Tensor>& in) {
            return std::vector<torch::Tensor>{loss(*model, in, objective)};  // mean over non-pad
          });
          n = cpu_batch.tgt_valid_lens.sum().item<int64_t>();  // CPU tensor: no device sync
          loss_sum += outs[0].to(torch::kDouble) * static_cast<double>(n);
        } else {
          // This rank's share of the global batch's mean: its token sum times world / global
          // tokens, so that the reducer's average over ranks is the one-process gradient.
          const double scale = dist->loss_scale(global);
          const auto outs = stepper.run(
              inputs, lr,
              [&](const std::vector<torch::Tensor>& in) {
                auto sum = loss(*model, in, summed(objective));
                return std::vector<torch::Tensor>{sum * scale, sum};
              },
              [&] { dist->prepare_for_backward(); });
          if (scale > 0) {
            n = cpu_batch.tgt_valid_lens.sum().item<int64_t>();
            loss_sum += outs[1].to(torch::kDouble);
          }
        }
        if (ctx.results != nullptr) ctx.results->append_metric("step", "lr", lr);
        tokens += n;
      }
      if (ctx.results != nullptr) stepper.record(*ctx.results);
      // The one read of the epoch; it waits for the device, so the time below includes its work.
      double loss_total = loss_sum.item<double>(), token_total = static_cast<double>(tokens);
      if (dist != nullptr) {  // every rank's share: the epoch's numbers are the whole epoch's
        const auto all = dist->sum({loss_total, token_total});
        loss_total = all[0];
        token_total = all[1];
      }
      const double train_loss = loss_total / std::max(token_total, 1.0);
      const double train_seconds = seconds_since(start);
      train::EpochReport r;
      r.epoch = epoch;
      r.train["loss"] = train_loss;
      r.train["tokens_per_s"] = token_total / std::max(train_seconds, 1e-9);
      r.train["seconds"] = train_seconds;
      const bool has_val = validate_ && ctx.dataset->has_split(data::Split::Val);
      if (has_val) validation_loss(ctx, objective, r.val);
      if (has_val && val_bleu_) r.val["bleu"] = validation_bleu(ctx);
      r.seconds = seconds_since(start);
      ctx.on_epoch(r);
      if (!std::isfinite(train_loss)) return train::FitResult::Diverged;
      // The checkpoint follows the flushed metrics, so it never claims rows the file lacks.
      st.epoch = epoch;
      const double metric = !has_val ? train_loss : by_bleu_ ? -r.val["bleu"] : r.val["loss"];
      const bool best = std::isfinite(metric) && metric < st.best_metric;
      if (best) {
        st.best_metric = metric;
        st.best_epoch = epoch;
      }
      if (checkpointing && ctx.writes_files()) {
        if (ctx.results != nullptr) st.metric_rows = ctx.results->metric_rows();
        // epoch-N.pt before last.pt: a run killed between the two redoes epoch N on resume.
        if (keep_ > 0) keep_epoch(ctx.checkpoint_dir, epoch, *model, st);
        train::save_checkpoint(last_path, *model, &opt, st);
        if (best) train::copy_checkpoint(last_path, best_path);
      }
      if (ctx.stopped()) return train::FitResult::Interrupted;
      if (patience_ > 0 && epoch < max_epochs_ && epoch - st.best_epoch >= patience_) {
        if (ctx.writes_files()) {
          spdlog::info("stopping early after epoch {}: {} has not improved for {} epochs (best {:.4g} at epoch {})",
                       epoch,
                       by_bleu_  ? "val/bleu"
                       : has_val ? "val/loss"
                                 : "train/loss",
                       patience_, by_bleu_ ? -st.best_metric : st.best_metric, st.best_epoch);
        }
        if (ctx.results != nullptr) ctx.results->set_attr("stopped_early_after_epoch", epoch);
        break;
      }
    }
    return train::FitResult::Completed;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  /// epoch-<epoch>.pt: the model's weights and the training state, no Adam moments (a third of
  /// last.pt's size); epoch files older than the last keep_ epochs are removed, whatever K an
  /// earlier session of a resumed run kept.
  void keep_epoch(const std::string& dir, int64_t epoch, const torch::nn::Module& model,
                  const train::TrainingState& st) const {
    train::save_checkpoint(train::epoch_checkpoint_path(dir, epoch), model, nullptr, st);
    for (const auto& kept : train::kept_checkpoints(dir)) {
      if (kept.epoch > epoch - keep_) continue;
      std::error_code ec;
      std::filesystem::remove(kept.path, ec);
      if (ec) spdlog::warn("could not remove the old checkpoint {}: {}", kept.path, ec.message());
    }
  }

  /// val/bleu: sacreBLEU of greedy translations of the validation split, in eval mode. Every rank
  /// of a data-parallel run translates the whole split with the same weights, so all agree.
  static double validation_bleu(train::TrainContext& ctx) {
    ctx.model->eval();
    const auto t = train::translate_split(ctx.model, *ctx.dataset, data::Split::Val, {});
    ctx.model->train();
    return train::score_translation(t).bleu.score;
  }

  /// The training objective of one batch {src, src_valid_lens, tgt_in, tgt_out}: the token loss,
  /// or with rdrop_alpha > 0 R-Drop's, the batch run twice as one of twice the rows, so that every
  /// pair meets two independent dropout masks.
  torch::Tensor loss(nn::EncoderDecoderImpl& model, const std::vector<torch::Tensor>& in,
                     const train::TokenLoss& how) const {
    if (rdrop_ == 0) return train::token_loss(model.forward(in[0], in[1], in[2]), in[3], how);  // [B, T, V]
    const auto twice = [](const torch::Tensor& t) { return torch::cat({t, t}); };
    const auto out = model.forward(twice(in[0]), twice(in[1]), twice(in[2]));  // [2B, T, V]
    const auto halves = out.chunk(2, 0);
    return train::rdrop_loss(halves[0], halves[1], in[3], how, rdrop_);
  }

  static train::TokenLoss summed(train::TokenLoss how) {
    how.reduce = train::TokenLoss::Reduce::sum;
    return how;
  }

  /// val/loss: the cross-entropy without label smoothing, comparable across runs and what best.pt
  /// is chosen by; with smoothing also val/smoothed_loss, the training objective on this split.
  void validation_loss(train::TrainContext& ctx, const train::TokenLoss& objective,
                       std::map<std::string, double>& out) {
    auto& model = ctx.model;
    model->eval();
    torch::NoGradGuard no_grad;
    const bool smoothing = objective.label_smoothing > 0;
    train::TokenLoss plain = summed(objective);
    plain.label_smoothing = 0;
    auto sums = torch::zeros({2}, torch::dtype(torch::kDouble).device(ctx.device));  // plain, smoothed
    int64_t tokens = 0;
    train::Distributed* dist = ctx.distributed;
    for (const auto& global : ctx.dataset->batches(data::Split::Val, false, 0)) {
      if (dist != nullptr && dist->loss_scale(global) == 0) continue;  // none of this batch is ours
      const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
      auto b = cpu_batch.to(ctx.device, true);
      auto out = model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      sums[0] += train::token_loss(out, b.tgt_out, plain).to(torch::kDouble);
      if (smoothing) sums[1] += train::token_loss(out, b.tgt_out, summed(objective)).to(torch::kDouble);
      tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();
    }
    model->train();
    const auto host = sums.cpu();
    double plain_total = host[0].item<double>(), smoothed_total = host[1].item<double>();
    double count = static_cast<double>(tokens);
    if (dist != nullptr) {
      const auto all = dist->sum({plain_total, smoothed_total, count});
      plain_total = all[0];
      smoothed_total = all[1];
      count = all[2];
    }
    out["loss"] = count > 0 ? plain_total / count : std::nan("");
    if (smoothing) out["smoothed_loss"] = count > 0 ? smoothed_total / count : std::nan("");
  }

  int64_t max_epochs_;
  double clip_, smoothing_, rdrop_;
  std::tuple<double, double> betas_;
  bool validate_, checkpoints_;
  int64_t keep_;
  bool by_bleu_, val_bleu_;
  int64_t patience_;
  train::GraphConfig graphs_;
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
          .option("checkpoints", &Config::checkpoints,
                  "write <results>.ckpt/last.pt every epoch and best.pt (lowest validation loss); needed for --resume")
          .option("keep_checkpoints", &Config::keep_checkpoints,
                  "also keep the weights of the last K epochs as <results>.ckpt/epoch-<N>.pt, for `runner average "
                  "RUN.h5 --last K` (0 = none; needs checkpoints: true)",
                  {.min = 0})
          .option("val_bleu", &Config::val_bleu,
                  "translate the validation split greedily after every epoch and record val/bleu (sacreBLEU)")
          .choice("best_by", &Config::best_by_bleu, {{"loss", false}, {"bleu", true}},
                  "what picks best.pt (and what patience watches): the lowest val/loss, or the highest val/bleu "
                  "(turns val_bleu on)")
          .option("patience", &Config::patience,
                  "stop when the best_by metric has not improved for this many epochs (0 = train max_epochs)",
                  {.min = 0}),
      /*pads=*/true);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  if (c.keep_checkpoints > 0 && !c.checkpoints) {
    o.fail("keep_checkpoints",
           fmt::format("keep_checkpoints: {} keeps epoch checkpoints, but checkpoints: false writes "
                       "none: set checkpoints: true, or keep_checkpoints: 0",
                       c.keep_checkpoints));
  }
  return std::make_shared<Seq2SeqTrainer>(c, train::parse_schedule(c.schedule, c.lr, o.owner()));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq",
               "teacher-forced cross-entropy with Adam, gradient clipping, LR schedules and resumable checkpoints",
               schema, make)
