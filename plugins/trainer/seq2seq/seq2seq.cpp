// Trainer "seq2seq": teacher-forced cross-entropy (ignoring <pad>), Adam, gradient clipping by
// global norm, per-epoch train/validation loss and tokens/s (d2l 1.0.3's Trainer + Seq2Seq), with
// a learning-rate schedule (recorded per step as /metrics/step/lr), and checkpoints after every
// epoch (last.pt, best.pt by validation loss) that a resumed run continues from exactly: the
// data order depends only on (seed, epoch), and model, Adam, schedule position and RNG states are
// restored.
#include <attnlab/config/binding.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/schedule.hpp>
#include <attnlab/train/trainer.hpp>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>

namespace {
using namespace attnlab;

/// Mean cross-entropy over non-pad labels; `probabilities`: the decoder returned softmax outputs.
torch::Tensor token_loss(const torch::Tensor& out, const torch::Tensor& labels, int64_t pad, bool probabilities,
                         torch::nn::functional::CrossEntropyFuncOptions::reduction_t reduction) {
  auto flat = out.reshape({-1, out.size(-1)});  // [B * T, V]
  auto y = labels.reshape(-1);                  // [B * T]
  if (probabilities) {
    return torch::nn::functional::nll_loss(
        torch::log(flat.clamp_min(1e-12)), y,
        torch::nn::functional::NLLLossFuncOptions().ignore_index(pad).reduction(reduction));
  }
  return torch::nn::functional::cross_entropy(
      flat, y, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(pad).reduction(reduction));
}

struct Config {
  int64_t max_epochs = 30;
  double lr = 0.001;
  double gradient_clip = 1.0;
  bool validate = true;
  config::Node schedule;
  bool checkpoints = true;
};

class Seq2SeqTrainer final : public train::Trainer {
 public:
  Seq2SeqTrainer(const Config& c, train::LrSchedule schedule)
      : max_epochs_(c.max_epochs),
        clip_(c.gradient_clip),
        validate_(c.validate),
        checkpoints_(c.checkpoints),
        schedule_(schedule) {}

  int64_t max_epochs() const override { return max_epochs_; }
  bool can_resume() const override { return checkpoints_; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(ctx.model, ConfigError,
                  "it trains an encoder + decoder: the experiment needs model: {{encoder: ..., decoder: ...}}");
    ATTNLAB_CHECK(ctx.dataset != nullptr && ctx.dataset->info().tgt_vocab_size > 0, ConfigError,
                  "it trains on token sequences, but the dataset has no target vocabulary");
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    auto& model = ctx.model;
    const auto pad = ctx.dataset->info().pad_id;
    const bool probabilities = model->decoder().outputs_probabilities();
    train::FusedAdam opt(model->parameters(), torch::optim::AdamOptions(schedule_.at(1)));
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
    for (int64_t epoch = st.epoch + 1; epoch <= max_epochs_; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      model->train();
      auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));  // on device, read once
      int64_t tokens = 0;
      for (const auto& global : ctx.dataset->batches(data::Split::Train, true, ctx.seed + epoch)) {
        if (dist != nullptr ? dist->should_stop(ctx.stopped()) : ctx.stopped()) return train::FitResult::Interrupted;
        const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
        auto b = cpu_batch.to(ctx.device, true);
        auto out = model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
        torch::Tensor loss;                                            // what backward sees
        int64_t n = 0;                                                 // tokens it counts
        if (dist == nullptr) {
          loss = token_loss(out, b.tgt_out, pad, probabilities, torch::kMean);  // mean over non-pad tokens
          n = cpu_batch.tgt_valid_lens.sum().item<int64_t>();                   // CPU tensor: no device sync
          loss_sum += loss.detach().to(torch::kDouble) * static_cast<double>(n);
        } else {
          // This rank's share of the global batch's mean: its token sum times world / global
          // tokens, so that the reducer's average over ranks is the one-process gradient.
          const double scale = dist->loss_scale(global);
          auto sum = token_loss(out, b.tgt_out, pad, probabilities, torch::kSum);
          loss = sum * scale;
          if (scale > 0) {
            n = cpu_batch.tgt_valid_lens.sum().item<int64_t>();
            loss_sum += sum.detach().to(torch::kDouble);
          }
        }
        opt.zero_grad();
        if (dist != nullptr) dist->prepare_for_backward();
        loss.backward();
        if (clip_ > 0) train::clip_grad_norm(params, clip_);
        const double lr = schedule_.at(++st.step);
        for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
        opt.step();
        if (ctx.results != nullptr) ctx.results->append_metric("step", "lr", lr);
        tokens += n;
      }
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
      if (has_val) r.val["loss"] = validation_loss(ctx, pad, probabilities);
      r.seconds = seconds_since(start);
      ctx.on_epoch(r);
      if (!std::isfinite(train_loss)) return train::FitResult::Diverged;
      // The checkpoint follows the flushed metrics, so it never claims rows the file lacks.
      st.epoch = epoch;
      const double metric = has_val ? r.val["loss"] : train_loss;
      const bool best = std::isfinite(metric) && metric < st.best_metric;
      if (best) {
        st.best_metric = metric;
        st.best_epoch = epoch;
      }
      if (checkpointing && ctx.writes_files()) {
        if (ctx.results != nullptr) st.metric_rows = ctx.results->metric_rows();
        train::save_checkpoint(last_path, *model, &opt, st);
        if (best) train::copy_checkpoint(last_path, best_path);
      }
      if (ctx.stopped()) return train::FitResult::Interrupted;
    }
    return train::FitResult::Completed;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  double validation_loss(train::TrainContext& ctx, int64_t pad, bool probabilities) {
    auto& model = ctx.model;
    model->eval();
    torch::NoGradGuard no_grad;
    auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));
    int64_t tokens = 0;
    train::Distributed* dist = ctx.distributed;
    for (const auto& global : ctx.dataset->batches(data::Split::Val, false, 0)) {
      if (dist != nullptr && dist->loss_scale(global) == 0) continue;  // none of this batch is ours
      const data::Batch cpu_batch = dist != nullptr ? dist->shard(global) : global;
      auto b = cpu_batch.to(ctx.device, true);
      auto out = model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      loss_sum += token_loss(out, b.tgt_out, pad, probabilities, torch::kSum).to(torch::kDouble);
      tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();
    }
    model->train();
    double total = loss_sum.item<double>(), count = static_cast<double>(tokens);
    if (dist != nullptr) {
      const auto all = dist->sum({total, count});
      total = all[0];
      count = all[1];
    }
    return count > 0 ? total / count : std::nan("");
  }

  int64_t max_epochs_;
  double clip_;
  bool validate_, checkpoints_;
  train::LrSchedule schedule_;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("max_epochs", &Config::max_epochs, "epochs to train", {.min = 1})
          .option("lr", &Config::lr, "Adam learning rate (the schedule's base rate)", {.min = 0.0})
          .option("gradient_clip", &Config::gradient_clip, "clip gradients to this global L2 norm (0 = off)",
                  {.min = 0.0})
          .option("validate", &Config::validate, "compute the validation loss after every epoch")
          .node("schedule", &Config::schedule, config::Type::Map, "{type: constant}",
                "learning-rate schedule: {type: constant|linear_warmup|inverse_sqrt, warmup_steps: N, d_model: D, "
                "factor: F} (attnlab/train/schedule.hpp)")
          .option("checkpoints", &Config::checkpoints,
                  "write <results>.ckpt/last.pt every epoch and best.pt (lowest validation loss); needed for --resume");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  return std::make_shared<Seq2SeqTrainer>(c, train::parse_schedule(c.schedule, c.lr, o.owner()));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq",
               "teacher-forced cross-entropy with Adam, gradient clipping, LR schedules and resumable checkpoints",
               schema, make)
