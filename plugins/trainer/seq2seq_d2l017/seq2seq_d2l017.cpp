// Trainer "seq2seq_d2l017": d2l 0.17's train_seq2seq (section 9.7), which the book's Bahdanau
// (10.4) and Transformer (10.7) numbers come from. It differs from "seq2seq" (d2l 1.0.3) in:
//   - Xavier-uniform init of every Linear weight and every GRU weight matrix before training;
//   - MaskedSoftmaxCELoss: per sequence, the masked token losses are averaged over all num_steps
//     positions (padding included in the divisor), and their sum over the batch is minimised;
//   - the reported loss is sum(per-sequence losses) / (valid target tokens), i.e. the mean token
//     cross-entropy divided by num_steps: the "loss 0.020" the book prints. The plain mean token
//     cross-entropy is reported too, as train/token_loss.
// Gradients are clipped to global norm 1 (d2l's grad_clipping), Adam, shuffled batches; no
// validation (d2l 0.17's load_data_nmt has none).
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/fused_gru.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cmath>

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

struct Config : train::GraphConfig {
  int64_t max_epochs = 300;
  double lr = 0.005;
  double gradient_clip = 1.0;
  bool xavier_init = true;  // init: xavier | default
};

class Seq2SeqD2l017Trainer final : public train::Trainer {
 public:
  explicit Seq2SeqD2l017Trainer(const Config& c)
      : max_epochs_(c.max_epochs), lr_(c.lr), clip_(c.gradient_clip), xavier_(c.xavier_init), graphs_(c) {}

  int64_t max_epochs() const override { return max_epochs_; }

  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(ctx.model, ConfigError,
                  "it trains an encoder + decoder: the experiment needs model: {{encoder: ..., decoder: ...}}");
    train::check_graph_options(graphs_, ctx);
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    check(ctx);
    auto& model = ctx.model;
    if (xavier_) xavier_init(*model);
    auto params = model->parameters();
    train::FusedAdam opt(params, torch::optim::AdamOptions(lr_));
    model->train();
    // The batches are num_steps long, so at most two shapes (full, last): no padding needed.
    train::TrainStep stepper(train::step_options(graphs_, clip_, ctx.precision), ctx.device, opt, params,
                             "seq2seq_d2l017");
    const train::TrainStep::Body body = [&](const std::vector<torch::Tensor>& in) {
      auto logits = model->forward(in[0], in[1], in[2]);  // [B, T, V]
      const int64_t batch = logits.size(0), steps = logits.size(1);
      auto ce =
          torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), in[3].reshape(-1),
                                               torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
              .view({batch, steps});  // [B, T]
      auto mask =
          (torch::arange(steps, in[4].options()).unsqueeze(0) < in[4].unsqueeze(1)).to(ce.scalar_type());  // [B, T]
      auto masked = ce * mask;                                                                             // [B, T]
      auto l = masked.mean(1);  // [B] MaskedSoftmaxCELoss
      return std::vector<torch::Tensor>{l.sum(), masked.sum()};
    };
    for (int64_t epoch = 1; epoch <= max_epochs_; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      auto loss_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));   // sum of l
      auto token_sum = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx.device));  // sum of token CE
      int64_t tokens = 0;
      for (const auto& cpu_batch : ctx.dataset->batches(data::Split::Train, true, ctx.seed + epoch)) {
        if (ctx.stopped()) return train::FitResult::Interrupted;
        auto b = cpu_batch.to(ctx.device, true);
        const auto outs = stepper.run({b.src, b.src_valid_lens, b.tgt_in, b.tgt_out, b.tgt_valid_lens}, lr_, body);
        loss_sum += outs[0].to(torch::kDouble);
        token_sum += outs[1].to(torch::kDouble);
        tokens += cpu_batch.tgt_valid_lens.sum().item<int64_t>();  // CPU tensor: no device sync
      }
      if (ctx.results != nullptr) stepper.record(*ctx.results);
      // Read the sums first: that waits for the device, so the time below includes its work.
      const double n = static_cast<double>(std::max<int64_t>(tokens, 1));
      const double loss = loss_sum.item<double>() / n, token_loss = token_sum.item<double>() / n;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      train::EpochReport r;
      r.epoch = epoch;
      r.train["loss"] = loss;
      r.train["token_loss"] = token_loss;
      r.train["tokens_per_s"] = static_cast<double>(tokens) / std::max(seconds, 1e-9);
      r.train["seconds"] = seconds;
      r.seconds = seconds;
      ctx.on_epoch(r);
      if (!std::isfinite(r.train["loss"])) return train::FitResult::Diverged;
      if (ctx.stopped()) return train::FitResult::Interrupted;
    }
    return train::FitResult::Completed;
  }

 private:
  int64_t max_epochs_;
  double lr_, clip_;
  bool xavier_;
  train::GraphConfig graphs_;
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
                  "initialisation"),
      /*pads=*/false);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<Seq2SeqD2l017Trainer>(binding().read(o));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "seq2seq_d2l017",
               "d2l 0.17 train_seq2seq: Xavier init, per-sequence masked CE averaged over num_steps, Adam, clip 1",
               schema, make)
