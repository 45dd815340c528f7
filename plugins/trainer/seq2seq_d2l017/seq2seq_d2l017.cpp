// Trainer "seq2seq_d2l017": d2l 0.17's train_seq2seq (section 9.7), which the book's Bahdanau
// (10.4) and Transformer (10.7) numbers come from. It differs from "seq2seq" (d2l 1.0.3) in:
//   - Xavier-uniform init of every Linear weight and every GRU weight matrix before training;
//   - MaskedSoftmaxCELoss: per sequence, the masked token losses are averaged over all num_steps
//     positions (padding included in the divisor), and their sum over the batch is minimised;
//   - the reported loss is sum(per-sequence losses) / (valid target tokens), i.e. the mean token
//     cross-entropy divided by num_steps: the "loss 0.020" the book prints. The plain mean token
//     cross-entropy is reported too, as train/token_loss.
// Gradients are clipped to global norm 1 (d2l's grad_clipping), Adam, shuffled batches; no
// validation (d2l 0.17's load_data_nmt has none). The epoch loop is the framework's
// (train/epoch_loop.hpp): data-parallel under torchrun, CUDA graphs, and checkpoints (best.pt by the
// training loss) and patience when asked; both are off by default, as the book has neither.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/fused_gru.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/functional.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>
#include <torch/nn/init.h>

#include <algorithm>

namespace {
using namespace attnlab;

/// d2l 0.17's xavier_init_weights applied to every submodule (net.apply).
void xavier_init(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(m.get())) {
      torch::nn::init::xavier_uniform_(linear->weight);
    } else if (dynamic_cast<torch::nn::GRUImpl*>(m.get()) != nullptr ||
               dynamic_cast<nn::FusedGruImpl*>(m.get()) != nullptr) {  // the GRU plugins' (nn/rnn.hpp)
      for (auto& p : m->named_parameters(/*recurse=*/false)) {
        if (p.key().find("weight") != std::string::npos) torch::nn::init::xavier_uniform_(p.value());
      }
    }
  }
}

struct Config : train::GraphConfig, train::LoopConfig {
  int64_t max_epochs = 300;
  double lr = 0.005;
  double gradient_clip = 1.0;
  bool xavier_init = true;  // init: xavier | default
};

/// d2l 0.17's train_seq2seq as hooks of the epoch loop (attnlab/train/epoch_loop.hpp). Its
/// objective is a sum over the batch's sequences, so a data-parallel rank's is its rows' sum.
class D2l017Hooks final : public train::EpochHooks {
 public:
  explicit D2l017Hooks(train::TrainContext& ctx) : ctx_(ctx), model_(ctx.model) {}

  torch::nn::Module& module() override { return *model_; }

  void begin_epoch(int64_t epoch) override {
    EpochHooks::begin_epoch(epoch);
    const auto sums = torch::dtype(torch::kDouble).device(ctx_.device);
    loss_sum_ = torch::zeros({}, sums);   // sum of l
    token_sum_ = torch::zeros({}, sums);  // sum of token CE
    tokens_ = 0;
  }

  // The batches are num_steps long, so at most two shapes (full, last): no padding needed.
  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare&, bool) override {
    auto b = rows.to(ctx_.device, true);
    return {b.src, b.src_valid_lens, b.tgt_in, b.tgt_out, b.tgt_valid_lens};
  }

  /// MaskedSoftmaxCELoss summed over the batch (the objective, a sum already with or without
  /// `summed`), and the summed token cross-entropy.
  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool) override {
    auto logits = model_->forward(in[0], in[1], in[2]);  // [B, T, V]
    const int64_t batch = logits.size(0), steps = logits.size(1);
    auto ce =
        torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), in[3].reshape(-1),
                                             torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
            .view({batch, steps});  // [B, T]
    auto mask =
        (torch::arange(steps, in[4].options()).unsqueeze(0) < in[4].unsqueeze(1)).to(ce.scalar_type());  // [B, T]
    auto masked = ce * mask;                                                                             // [B, T]
    auto l = masked.mean(1);  // [B] MaskedSoftmaxCELoss
    return {l.sum(), masked.sum()};
  }

  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch& rows, const train::StepShare&) override {
    loss_sum_ += outs[0].to(torch::kDouble);
    token_sum_ += outs[1].to(torch::kDouble);
    tokens_ += rows.tgt_valid_lens.sum().item<int64_t>();  // CPU tensor: no device sync
  }

  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    // Read the sums first: that waits for the device, so the time below includes its work.
    const auto all = end.sum({loss_sum_.item<double>(), token_sum_.item<double>(), static_cast<double>(tokens_)});
    const double n = std::max(all[2], 1.0);
    const double loss = all[0] / n, token_loss = all[1] / n;
    const double seconds = end.seconds();
    r.train["loss"] = loss;
    r.train["token_loss"] = token_loss;
    r.train["tokens_per_s"] = all[2] / std::max(seconds, 1e-9);
    r.train["seconds"] = seconds;
  }

 private:
  train::TrainContext& ctx_;
  nn::EncoderDecoder model_;
  torch::Tensor loss_sum_, token_sum_;
  int64_t tokens_ = 0;
};

class Seq2SeqD2l017Trainer final : public train::Trainer {
 public:
  explicit Seq2SeqD2l017Trainer(const Config& c) : c_(c) {}

  int64_t max_epochs() const override { return c_.max_epochs; }
  bool can_resume() const override { return c_.checkpoints; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(ctx.model, ConfigError,
                  "it trains an encoder + decoder: the experiment needs model: {{encoder: ..., decoder: ...}}");
    train::check_graph_options(c_, ctx);
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    if (c_.xavier_init) xavier_init(*ctx.model);
    train::FusedAdam opt(ctx.model->parameters(), torch::optim::AdamOptions(c_.lr));
    D2l017Hooks hooks(ctx);
    return train::run_epochs(ctx, hooks, &opt,
                             {.who = "seq2seq_d2l017",
                              .max_epochs = c_.max_epochs,
                              .loop = c_,
                              .step = train::step_options(c_, c_.gradient_clip, ctx.precision),
                              .schedule = {.lr = c_.lr}});
  }

 private:
  Config c_;
};

const config::Binding<Config>& binding() {
  static const auto b = train::with_graph_options(
      config::Binding<Config>()
          .option("max_epochs", &Config::max_epochs, "epochs to train", {.min = 1})
          .option("lr", &Config::lr, "Adam learning rate", {.min = 0.0})
          .option("gradient_clip", &Config::gradient_clip, "clip gradients to this global L2 norm (0 = off)",
                  {.min = 0.0})
          .choice("init", &Config::xavier_init, {{"xavier", true}, {"default", false}},
                  "xavier: Xavier-uniform Linear and GRU weights as d2l 0.17's train_seq2seq; default: keep torch's "
                  "initialisation")
          .include(train::checkpoint_options("lowest training loss"))
          .include(train::patience_option("the training loss")),
      /*pads=*/false);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  train::check_loop_options(c, o);
  return std::make_shared<Seq2SeqD2l017Trainer>(c);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq_d2l017",
               "d2l 0.17 train_seq2seq: Xavier init, per-sequence masked CE averaged over num_steps, Adam, clip 1",
               schema, make)
