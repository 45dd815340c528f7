// Trainer "regression": Step-by-Step ch. 10's training of a sequence regressor. MSE, Adam,
// mini-batches; training is teacher-forced in train mode, validation predicts autoregressively in
// eval mode (the book's model switches on self.training). Per epoch it also records the loss of
// the first validation batch in train mode (dropout on, teacher forcing) and in eval mode: the
// book's observation that dropout makes the training-mode loss the larger one. The epoch loop is the
// framework's (train/epoch_loop.hpp): data-parallel under torchrun, CUDA graphs, and checkpoints
// and patience when asked (both off by default: the book's runs keep no checkpoints).
// evaluate(): test predictions, their labels (corner directions) and attention into the results.
#include <attnlab/config/binding.hpp>
#include <attnlab/data/labels.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/regression.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/train/attention_results.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>

#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace {
using namespace attnlab;

/// Mean squared error over the valid target steps. pred, target [B, T, F], valid_lens [B] (or
/// undefined = all valid) -> scalar
torch::Tensor masked_mse(const torch::Tensor& pred, const torch::Tensor& target, const torch::Tensor& valid_lens) {
  if (!valid_lens.defined()) return torch::mse_loss(pred, target);
  auto steps = torch::arange(pred.size(1), valid_lens.options()).unsqueeze(0);  // [1, T]
  auto mask = (steps < valid_lens.unsqueeze(1)).unsqueeze(2).to(pred.dtype());  // [B, T, 1]
  auto count = mask.sum() * static_cast<double>(pred.size(2));                  // valid values
  return ((pred - target).pow(2) * mask).sum() / count.clamp_min(1.0);
}

/// The squared errors summed over the valid target steps (the numerator of masked_mse), for a
/// data-parallel rank's part of a batch. pred, target [B, T, F], valid_lens [B] or undefined -> scalar
torch::Tensor masked_sse(const torch::Tensor& pred, const torch::Tensor& target, const torch::Tensor& valid_lens) {
  if (!valid_lens.defined()) return (pred - target).pow(2).sum();
  auto steps = torch::arange(pred.size(1), valid_lens.options()).unsqueeze(0);  // [1, T]
  auto mask = (steps < valid_lens.unsqueeze(1)).unsqueeze(2).to(pred.dtype());  // [B, T, 1]
  return ((pred - target).pow(2) * mask).sum();
}

/// "(-1.02, 0.97)" for a point [F]
std::string point_label(const torch::Tensor& p) {
  auto a = p.to(torch::kCPU, torch::kDouble).contiguous();
  std::string s = "(";
  for (int64_t i = 0; i < a.size(0); ++i) s += fmt::format("{}{:.2f}", i ? ", " : "", a[i].item<double>());
  return s + ")";
}

std::vector<std::string> point_labels(const torch::Tensor& seq) {  // seq [T, F]
  std::vector<std::string> out;
  for (int64_t t = 0; t < seq.size(0); ++t) out.push_back(point_label(seq[t]));
  return out;
}

struct Config : train::GraphConfig, train::LoopConfig {
  int64_t max_epochs = 50;
  double lr = 0.01;
  int64_t attention_samples = 4;
  bool validate = true;
};

/// The book's training as hooks of the epoch loop (attnlab/train/epoch_loop.hpp): teacher-forced
/// steps, the epoch's train loss as the mean of its batches' losses, the validation losses.
class RegressionHooks final : public train::EpochHooks {
 public:
  RegressionHooks(const Config& c, train::TrainContext& ctx, std::shared_ptr<nn::SequenceRegressor> model)
      : c_(c), ctx_(ctx), model_(std::move(model)) {}

  torch::nn::Module& module() override { return *model_; }

  void begin_epoch(int64_t epoch) override {
    EpochHooks::begin_epoch(epoch);
    loss_sum_ = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx_.device));  // on device, read once
    batches_ = 0;
  }

  /// The batch's mean squared error divides by its valid values.
  double normalizer(const data::Batch& global) const override {
    const auto& t = global.tgt_out;  // [B, T, F]
    if (!global.tgt_valid_lens.defined()) return static_cast<double>(t.numel());
    return static_cast<double>(global.tgt_valid_lens.sum().item<int64_t>() * t.size(2));
  }

  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare&, bool) override {
    auto b = rows.to(ctx_.device);
    std::vector<torch::Tensor> in{b.src, b.tgt_in, b.tgt_out};
    if (b.tgt_valid_lens.defined()) in.push_back(b.tgt_valid_lens);
    return in;
  }

  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool summed) override {
    auto pred = model_->forward(in[0], in[1]);  // [B, T, F]
    const auto lens = in.size() > 3 ? in[3] : torch::Tensor();
    return {summed ? masked_sse(pred, in[2], lens) : masked_mse(pred, in[2], lens)};
  }

  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch&, const train::StepShare& share) override {
    // One process: the batch's mean; a data-parallel rank: its share of that mean.
    loss_sum_ += share.whole ? outs[0].to(torch::kDouble) : outs[0].to(torch::kDouble) / share.normalizer;
    if (share.begin == 0) ++batches_;  // every global batch once, on the rank holding its first row
  }

  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    const auto all = end.sum({loss_sum_.item<double>(), static_cast<double>(batches_)});
    r.train["loss"] = all[0] / std::max(all[1], 1.0);  // the book's mean of batch losses
    r.train["seconds"] = end.seconds();
    if (c_.validate && ctx_.dataset->has_split(data::Split::Val)) validation(r.val);
  }

 private:
  /// Every rank of a data-parallel run computes the whole validation with the same weights.
  void validation(std::map<std::string, double>& out) {
    torch::NoGradGuard no_grad;
    auto batches = ctx_.dataset->batches(data::Split::Val, false, ctx_.seed);
    if (batches.empty()) return;
    model_->eval();
    double sum = 0.0;
    for (const auto& cpu_batch : batches) {
      auto b = cpu_batch.to(ctx_.device);
      sum += masked_mse(model_->predict(b.src, b.tgt_out.size(1)), b.tgt_out, b.tgt_valid_lens).item<double>();
    }
    out["loss"] = sum / static_cast<double>(batches.size());
    // The first validation batch as the book's model sees it in each mode.
    auto first = batches.front().to(ctx_.device);
    out["batch_loss_eval_mode"] =
        masked_mse(model_->predict(first.src, first.tgt_out.size(1)), first.tgt_out, first.tgt_valid_lens)
            .item<double>();
    model_->train();
    out["batch_loss_train_mode"] =
        masked_mse(model_->forward(first.src, first.tgt_in), first.tgt_out, first.tgt_valid_lens).item<double>();
  }

  const Config& c_;
  train::TrainContext& ctx_;
  std::shared_ptr<nn::SequenceRegressor> model_;
  torch::Tensor loss_sum_;
  int64_t batches_ = 0;
};

class RegressionTrainer final : public train::Trainer {
 public:
  explicit RegressionTrainer(const Config& c) : c_(c) {}

  int64_t max_epochs() const override { return c_.max_epochs; }
  bool can_resume() const override { return c_.checkpoints; }
  bool supports_distributed() const override { return true; }

  void check(const train::TrainContext& ctx) const override {
    regressor(ctx);
    ATTNLAB_CHECK(ctx.dataset != nullptr && ctx.dataset->info().num_features > 0, ConfigError,
                  "it regresses continuous sequences, but the dataset has no features (a token dataset?)");
    train::check_graph_options(c_, ctx);
  }

  int64_t num_parameters(const train::TrainContext& ctx) const override {
    return nn::count_parameters(*regressor(ctx));  // also refuses a missing/wrong model before the run starts
  }

  train::FitResult fit(train::TrainContext& ctx) override {
    auto model = regressor(ctx);
    train::FusedAdam opt(model->parameters(), torch::optim::AdamOptions(c_.lr));
    RegressionHooks hooks(c_, ctx, model);
    return train::run_epochs(ctx, hooks, &opt,
                             {.who = "regression",
                              .max_epochs = c_.max_epochs,
                              .loop = c_,
                              .step = train::step_options(c_, /*gradient_clip=*/0.0, ctx.precision),
                              .schedule = {.lr = c_.lr}});
  }

  void evaluate(train::TrainContext& ctx) override {
    auto model = regressor(ctx);
    const auto split = ctx.dataset->has_split(data::Split::Test) ? data::Split::Test : data::Split::Val;
    const std::string base = fmt::format("predictions/{}", data::split_name(split));
    model->eval();
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> src, tgt, lens, pred;
    for (const auto& cpu_batch : ctx.dataset->batches(split, false, ctx.seed)) {
      auto b = cpu_batch.to(ctx.device);
      pred.push_back(model->predict(b.src, b.tgt_out.size(1)).cpu());  // [B, T, F]
      src.push_back(cpu_batch.src);
      tgt.push_back(cpu_batch.tgt_out);
      lens.push_back(cpu_batch.tgt_valid_lens);
    }
    ATTNLAB_CHECK(!pred.empty(), DataError, "trainer 'regression': the {} split has no batches",
                  data::split_name(split));
    auto S = torch::cat(src), T = torch::cat(tgt), L = torch::cat(lens), P = torch::cat(pred);  // [N, *, F], [N]
    auto& res = *ctx.results;
    results::write_tensor(res, base + "/source", S);
    results::write_tensor(res, base + "/target", T);
    results::write_tensor(res, base + "/prediction", P);
    results::write_tensor(res, base + "/target_lengths", L.to(torch::kFloat32));
    res.append_metric(data::split_name(split), "loss", masked_mse(P, T, L).item<double>());

    std::vector<std::string> label_text;  // per row, for attention sample names
    std::string labels_path;
    std::vector<std::string> values;
    if (const auto* labelled = dynamic_cast<const data::SequenceLabels*>(ctx.dataset)) {
      auto labels = labelled->labels(split);  // [N]
      values = labelled->label_values();
      labels_path = base + "/" + labelled->label_name();
      results::write_tensor(res, labels_path, labels.to(torch::kFloat32));
      res.set_attr(labelled->label_name() + "_values", values);
      for (int64_t i = 0; i < labels.size(0); ++i) {
        const auto v = labels[i].item<int64_t>();
        label_text.push_back(v >= 0 && v < static_cast<int64_t>(values.size()) ? values[v] : std::to_string(v));
      }
    }
    if (P.size(2) == 2) declare_plane_figure(ctx, base, labels_path, values);
    record_attention(ctx, *model, S, P, label_text);
    res.flush();
  }

 private:
  /// Sequences of points in the plane as Step-by-Step's sequence_pred picture (`runner plot`,
  /// `runner report`): a panel per test sequence with its input, target and prediction, titled by
  /// its label. The dataset's metadata may say what the points lie on (points.outline: x0, y0, x1,
  /// y1, ...) and the axes' ranges (x.range, y.range: low, high).
  static void declare_plane_figure(train::TrainContext& ctx, const std::string& base, const std::string& labels,
                                   const std::vector<std::string>& label_names) {
    const auto& meta = ctx.dataset->info().meta;
    results::Figure f;
    f.name = "predictions";
    f.kind = results::FigureKind::sequences;
    const auto lengths = base + "/target_lengths";
    f.layers = {
        {.label = "Input", .data = base + "/source", .style = results::Style::dashed, .marker = results::Marker::dot},
        {.label = "Target",
         .data = base + "/target",
         .lengths = lengths,
         .continues = "Input",
         .marker = results::Marker::dot},
        {.label = "Predicted",
         .data = base + "/prediction",
         .lengths = lengths,
         .continues = "Input",
         .style = results::Style::dashed,
         .marker = results::Marker::cross}};
    f.panel_labels = labels;
    f.label_names = label_names;
    if (const auto outline = meta.get<std::vector<double>>("points.outline")) {
      for (size_t i = 0; i + 1 < outline->size(); i += 2) f.outline.emplace_back((*outline)[i], (*outline)[i + 1]);
    }
    f.xlim = meta.range("x.range");
    f.ylim = meta.range("y.range");
    results::declare_figure(*ctx.results, f, "trainer 'regression'");
  }

  static std::shared_ptr<nn::SequenceRegressor> regressor(const train::TrainContext& ctx) {
    ATTNLAB_CHECK(ctx.custom != nullptr, ConfigError,
                  "it needs a sequence regression model: model: {{plugin: seq2seq_regression | "
                  "torch_transformer, ...}}, found {}",
                  ctx.model ? "an encoder + decoder model" : "no model");
    auto model = std::dynamic_pointer_cast<nn::SequenceRegressor>(ctx.custom);
    ATTNLAB_CHECK(model != nullptr, ConfigError,
                  "it needs a model implementing nn::SequenceRegressor (attnlab/nn/regression.hpp), found a model "
                  "plugin that does not");
    return model;
  }

  /// Attention of the first attention_samples rows: "test 0 (clockwise)" -> encoder_self,
  /// decoder_self, decoder_cross, each [layers, heads, Q, K] with the points as labels.
  void record_attention(train::TrainContext& ctx, nn::SequenceRegressor& model, const torch::Tensor& src,
                        const torch::Tensor& pred, const std::vector<std::string>& label_text) {
    const int64_t k = std::min<int64_t>(c_.attention_samples, src.size(0));
    if (k <= 0) return;
    auto s = src.narrow(0, 0, k);  // [k, S, F]
    nn::AttentionRecorder recorder;
    torch::Tensor p;  // [k, T, F]
    {
      nn::RecordingScope scope(&recorder);
      p = model.predict(s.to(ctx.device), pred.size(1)).cpu();
    }
    auto dec_in = nn::shift_target(s, p);  // [k, T, F] what the decoder saw
    const auto split = ctx.dataset->has_split(data::Split::Test) ? "test" : "val";
    for (int64_t i = 0; i < k; ++i) {
      auto name = fmt::format("{} {}", split, i);
      if (i < static_cast<int64_t>(label_text.size())) name += fmt::format(" ({})", label_text[i]);
      train::write_attention(*ctx.results, name, recorder, i,
                             {{nn::Side::Source, point_labels(s[i])}, {nn::Side::Target, point_labels(dec_in[i])}});
    }
  }

  Config c_;
};

const config::Binding<Config>& binding() {
  static const auto b = train::with_graph_options(
      config::Binding<Config>()
          .option("max_epochs", &Config::max_epochs, "epochs to train", {.min = 1})
          .option("lr", &Config::lr, "Adam learning rate", {.min = 0.0})
          .option("attention_samples", &Config::attention_samples,
                  "test sequences whose attention is recorded after training", {.min = 0})
          .option("validate", &Config::validate, "compute the validation losses after every epoch")
          .include(train::checkpoint_options("lowest validation loss"))
          .include(train::patience_option("val/loss (train/loss without validation)")),
      /*pads=*/false);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  const Config c = binding().read(o);
  train::check_loop_options(c, o);
  return std::make_shared<RegressionTrainer>(c);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "regression",
               "MSE + Adam for sequence regression models (Step-by-Step ch. 10): teacher-forced training, "
               "autoregressive validation, test predictions and attention",
               schema, make)
