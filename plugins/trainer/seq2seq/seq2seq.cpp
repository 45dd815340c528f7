// Trainer "seq2seq": teacher-forced cross-entropy (ignoring <pad>), Adam, gradient clipping by
// global norm, per-epoch train/validation loss and tokens/s (d2l 1.0.3's Trainer + Seq2Seq).
#include <attnlab/train/trainer.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cmath>

namespace {
using namespace attnlab;

class Seq2SeqTrainer final : public train::Trainer {
 public:
  explicit Seq2SeqTrainer(const config::Options& o)
      : max_epochs_(o.get_int("max_epochs")),
        lr_(o.get_float("lr")),
        clip_(o.get_float("gradient_clip")),
        validate_(o.get_bool("validate")) {}

  int64_t max_epochs() const override { return max_epochs_; }

  train::FitResult fit(train::TrainContext& ctx) override {
    auto& model = ctx.model;
    const auto pad = ctx.dataset->info().pad_id;
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(lr_));
    auto params = model->parameters();
    for (int64_t epoch = 1; epoch <= max_epochs_; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      model->train();
      auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));  // on device, read once
      int64_t tokens = 0;
      for (const auto& cpu_batch : ctx.dataset->batches(data::Split::Train, true, ctx.seed + epoch)) {
        if (ctx.stopped()) return train::FitResult::Interrupted;
        auto b = cpu_batch.to(ctx.device, true);
        auto logits = model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
        auto loss = torch::nn::functional::cross_entropy(
            logits.reshape({-1, logits.size(-1)}), b.tgt_out.reshape(-1),
            torch::nn::functional::CrossEntropyFuncOptions().ignore_index(pad));  // mean over non-pad tokens
        opt.zero_grad();
        loss.backward();
        if (clip_ > 0) torch::nn::utils::clip_grad_norm_(params, clip_);
        opt.step();
        const int64_t n = cpu_batch.tgt_valid_lens.sum().item<int64_t>();  // CPU tensor: no device sync
        loss_sum += loss.detach().to(torch::kDouble) * static_cast<double>(n);
        tokens += n;
      }
      const double train_seconds = seconds_since(start);
      train::EpochReport r;
      r.epoch = epoch;
      const double train_loss = loss_sum.item<double>() / static_cast<double>(std::max<int64_t>(tokens, 1));
      r.train["loss"] = train_loss;
      r.train["tokens_per_s"] = static_cast<double>(tokens) / std::max(train_seconds, 1e-9);
      r.train["seconds"] = train_seconds;
      if (validate_ && ctx.dataset->has_split(data::Split::Val)) r.val["loss"] = validation_loss(ctx, pad);
      r.seconds = seconds_since(start);
      ctx.on_epoch(r);
      if (!std::isfinite(train_loss)) return train::FitResult::Diverged;
      if (ctx.stopped()) return train::FitResult::Interrupted;
    }
    return train::FitResult::Completed;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  double validation_loss(train::TrainContext& ctx, int64_t pad) {
    auto& model = ctx.model;
    model->eval();
    torch::NoGradGuard no_grad;
    auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));
    int64_t tokens = 0;
    for (const auto& cpu_batch : ctx.dataset->batches(data::Split::Val, false, 0)) {
      auto b = cpu_batch.to(ctx.device, true);
      auto logits = model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      auto loss = torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(-1)}), b.tgt_out.reshape(-1),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(pad).reduction(torch::kSum));
      loss_sum += loss.to(torch::kDouble);
      tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();
    }
    model->train();
    return tokens ? loss_sum.item<double>() / static_cast<double>(tokens) : std::nan("");
  }

  int64_t max_epochs_;
  double lr_, clip_;
  bool validate_;
};

config::Schema schema() {
  using namespace config;
  return {opt_int("max_epochs", 30, "epochs to train", 1),
          opt_float("lr", 0.001, "Adam learning rate", 0.0),
          opt_float("gradient_clip", 1.0, "clip gradients to this global L2 norm (0 = off)", 0.0),
          opt_bool("validate", true, "compute the validation loss after every epoch")};
}

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<Seq2SeqTrainer>(o);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq",
               "teacher-forced cross-entropy with Adam and gradient clipping (d2l Seq2Seq + Trainer)", schema, make)
