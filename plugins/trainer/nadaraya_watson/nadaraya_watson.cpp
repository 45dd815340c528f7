// Trainer "nadaraya_watson": d2l 0.17 section 10.2 as a model/trainer pair. There is no encoder or
// decoder: the trainer builds its NadarayaWatson model around a scorer from the registry
// (average pooling, the nonparametric Gaussian kernel, or the parametric one with a learnable w),
// trains it when the scorer has parameters (leave-one-out keys from the training set, SGD, summed
// squared error), then writes test predictions, the truth and the attention matrix.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/train/attention_results.hpp>
#include <attnlab/train/trainer.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>

namespace {

using namespace attnlab;

/// What its attention records as: queries are the test inputs, keys the training inputs.
constexpr const char* kPooling = "attention_pooling";

/// Attention pooling of scalar values by scalar queries and keys (d2l's NWKernelRegression with
/// the kernel factored out into the scorer).
class NadarayaWatsonImpl : public torch::nn::Module {
 public:
  explicit NadarayaWatsonImpl(std::shared_ptr<nn::Scorer> scorer)
      : attention(
            register_module("attention", nn::Attention(std::move(scorer), 0.0, nn::RecordAs{.module = kPooling}))) {}
  /// queries [Q], keys [Q, K], values [Q, K] (each query its own key set) -> predictions [Q]
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values) {
    auto out = attention->forward(queries.view({-1, 1, 1}), keys.unsqueeze(-1), values.unsqueeze(-1));  // [Q, 1, 1]
    return out.view({-1});                                                                              // [Q]
  }
  /// queries [Q], keys [K], values [K] (one key set for all) -> predictions [Q]
  torch::Tensor forward_shared(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values) {
    auto out =
        attention->forward(queries.view({1, -1, 1}), keys.view({1, -1, 1}), values.view({1, -1, 1}));  // [1, Q, 1]
    return out.view({-1});                                                                             // [Q]
  }
  nn::Attention attention;
};
TORCH_MODULE(NadarayaWatson);

struct Data {
  torch::Tensor x, y;  // [N], [N]
};

/// A split's batches, concatenated in order: src [b, 1, 1] -> x [N], tgt_out [b, 1, 1] -> y [N].
Data load(const data::Dataset& dataset, data::Split split, torch::Device device) {
  ATTNLAB_CHECK(dataset.has_split(split), DataError, "nadaraya_watson needs a '{}' split; the dataset has none",
                data::split_name(split));
  std::vector<torch::Tensor> xs, ys;
  for (const auto& b : dataset.batches(split, /*shuffle=*/false, 0)) {
    ATTNLAB_CHECK(b.src.defined() && b.tgt_out.defined() && b.src.numel() == b.src.size(0) &&
                      b.tgt_out.numel() == b.tgt_out.size(0),
                  DataError,
                  "nadaraya_watson expects one scalar input and target per row (src and tgt_out [B, 1, 1]), found "
                  "src {} and tgt_out {}",
                  b.src.defined() ? c10::str(b.src.sizes()) : "undefined",
                  b.tgt_out.defined() ? c10::str(b.tgt_out.sizes()) : "undefined");
    xs.push_back(b.src.reshape({-1}));
    ys.push_back(b.tgt_out.reshape({-1}));
  }
  return {torch::cat(xs).to(device, torch::kFloat), torch::cat(ys).to(device, torch::kFloat)};
}

/// Mean over rows of the entropy -sum p log p of weights [..., K].
double mean_entropy(const torch::Tensor& weights) {
  auto p = weights.to(torch::kDouble);
  return -(p * torch::log(p.clamp_min(1e-30))).sum(-1).mean().item<double>();
}

struct Config {
  std::string variant = "parametric";  // average | nonparametric | parametric
  config::Node scorer;                 // {} = the variant's
  int64_t max_epochs = 5;
  double lr = 0.5;
  bool half_sse = true;  // loss: half_sse | sse
  double init_w = -1.0;
};

class NadarayaWatsonTrainer final : public train::Trainer {
 public:
  NadarayaWatsonTrainer(const Config& c, const config::Options& o, const plugin::BuildContext& ctx)
      : variant_(c.variant), epochs_(c.max_epochs), lr_(c.lr), half_(c.half_sse) {
    ATTNLAB_CHECK(ctx.registry != nullptr, PluginError, "{}: {} needs a plugin registry to create its scorer",
                  o.resolved().where(), o.owner());
    nn::ScorerContext scalars;  // scalar queries (test inputs) and keys (training inputs), one head
    scalars.query_size = scalars.key_size = 1;
    scalars.role = nn::ScorerContext::Role::Cross;
    scalars.owner = fmt::format("{} at '{}'", o.owner(), o.resolved().path());
    model_ = NadarayaWatson(ctx.registry->create<nn::Scorer>(scorer_node(c, o, ctx), ctx, scalars));
    model_->to(ctx.device);
    trains_ = !model_->parameters().empty();
  }

  int64_t max_epochs() const override { return trains_ ? epochs_ : 1; }
  void check(const train::TrainContext& ctx) const override {
    ATTNLAB_CHECK(!ctx.model && !ctx.custom, ConfigError,
                  "it builds its own kernel regression model: remove the experiment's model section");
  }

  int64_t num_parameters(const train::TrainContext&) const override { return nn::count_parameters(*model_); }

  train::FitResult fit(train::TrainContext& ctx) override {
    train_ = load(*ctx.dataset, data::Split::Train, ctx.device);
    test_ = load(*ctx.dataset, data::Split::Test, ctx.device);
    const int64_t n = train_.x.size(0);
    ATTNLAB_CHECK(n >= 2, DataError, "nadaraya_watson needs at least 2 training points, found {}", n);
    // Leave-one-out: training point i is predicted from every other training point.
    auto off_diagonal = torch::eye(n, torch::TensorOptions().dtype(torch::kBool).device(ctx.device)).logical_not();
    auto keys = train_.x.repeat({n, 1}).masked_select(off_diagonal).view({n, n - 1});    // [n, n - 1]
    auto values = train_.y.repeat({n, 1}).masked_select(off_diagonal).view({n, n - 1});  // [n, n - 1]
    std::unique_ptr<torch::optim::SGD> opt;
    if (trains_) opt = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(lr_));
    for (int64_t epoch = 1; epoch <= max_epochs(); ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      model_->train(trains_);
      auto y_hat = model_->forward(train_.x, keys, values);               // [n]
      auto loss = (y_hat - train_.y).pow(2).sum() * (half_ ? 0.5 : 1.0);  // scalar
      if (trains_) {
        opt->zero_grad();
        loss.backward();
        opt->step();
      }
      train::EpochReport r;
      r.epoch = epoch;
      r.train["loss"] = loss.item<double>();  // before this epoch's step, as the book prints it
      if (auto w = kernel_w(); !std::isnan(w)) r.train["w"] = w;
      ctx.results->append_metric("test", "mse", test_mse());
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ctx.on_epoch(r);
      if (!std::isfinite(r.train["loss"])) return train::FitResult::Diverged;
      if (ctx.stopped()) return train::FitResult::Interrupted;
    }
    return train::FitResult::Completed;
  }

  void evaluate(train::TrainContext& ctx) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    nn::AttentionRecorder recorder;
    torch::Tensor y_hat;  // [n_test]
    {
      nn::RecordingScope scope(&recorder);
      y_hat = model_->forward_shared(test_.x, train_.x, train_.y);
    }
    auto& res = *ctx.results;
    results::write_tensor(res, "predictions/x", test_.x);
    results::write_tensor(res, "predictions/test", y_hat);
    results::write_tensor(res, "predictions/truth", test_.y);
    results::write_tensor(res, "data/x_train", train_.x);
    results::write_tensor(res, "data/y_train", train_.y);
    declare_figure(res, ctx.dataset->info().meta);
    train::write_attention(res, "test", recorder, 0,
                           {{nn::Side::Queries, labels(test_.x)}, {nn::Side::Keys, labels(train_.x)}});
    const double entropy = mean_entropy(recorder.module(kPooling).weights);  // [1, 1, 1, n_test, n_train]
    const double mse = (y_hat - test_.y).pow(2).mean().item<double>();
    res.set_attr("test_mse", mse);
    res.set_attr("attention_entropy", entropy);
    if (auto w = kernel_w(); !std::isnan(w)) res.set_attr("kernel_w", w);
    res.flush();
    std::cout << fmt::format("nadaraya_watson {}: test MSE {:.4f}, mean attention entropy {:.3f} nats{}", variant_, mse,
                             entropy, std::isnan(kernel_w()) ? std::string() : fmt::format(", w {:.3f}", kernel_w()))
              << std::endl;
  }

 private:
  /// d2l's plot_kernel_reg: truth and prediction over the test inputs, the training points as dots,
  /// on the axes' ranges the dataset's metadata gives (x.range, y.range), else the data's.
  static void declare_figure(results::Results& res, const plugin::Metadata& meta) {
    results::Figure f;
    f.name = "kernel_regression";
    f.xlabel = "x";
    f.ylabel = "y";
    f.xlim = meta.range("x.range");
    f.ylim = meta.range("y.range");
    f.layers = {{.label = "Truth", .x = "predictions/x", .y = "predictions/truth"},
                {.label = "Pred", .x = "predictions/x", .y = "predictions/test", .style = results::Style::dashed},
                {.label = "",
                 .x = "data/x_train",
                 .y = "data/y_train",
                 .style = results::Style::points,
                 .marker = results::Marker::dot}};
    results::declare_figure(res, f, "trainer 'nadaraya_watson'");
  }

  /// The trainer's `scorer` option, or the variant's scorer when it is empty.
  static config::Node scorer_node(const Config& c, const config::Options& o, const plugin::BuildContext& ctx) {
    const config::Node& given = c.scorer;
    if (!(given.is_map() && given.size() == 0) && !given.is_null()) return given;
    using config::Node;
    const auto loc = o.resolved().location();
    // Placed where the option sits (trainer.scorer), so the recorded config reads as if written.
    const auto& owner = o.resolved().path();
    Node node = Node::map(loc, owner.empty() ? "scorer" : owner + ".scorer");
    if (c.variant == "average") {
      node.set("plugin", Node::scalar("average", loc));
      return node;
    }
    node.set("plugin", Node::scalar("gaussian_kernel", loc));
    const bool learnable = c.variant == "parametric";
    double w = 1.0;
    if (learnable) {
      w = c.init_w;
      if (w < 0) {  // the book's torch.rand((1,)), from a generator of the experiment seed
        auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(ctx.seed) + 1);
        w = torch::rand({1}, gen).item<double>();
      }
    }
    node.set("learnable", Node::scalar(learnable ? "true" : "false", loc));
    node.set("w", Node::scalar(fmt::format("{}", w), loc));
    return node;
  }

  /// The Gaussian kernel's w (parameter or buffer "attention.scorer.w"); NaN for other scorers.
  double kernel_w() const {
    const std::string name = "attention.scorer.w";
    const auto params = model_->named_parameters();
    if (const auto* p = params.find(name)) return p->item<double>();
    const auto buffers = model_->named_buffers();
    if (const auto* b = buffers.find(name)) return b->item<double>();
    return std::nan("");
  }

  double test_mse() {
    torch::NoGradGuard no_grad;
    auto y_hat = model_->forward_shared(test_.x, train_.x, train_.y);  // [n_test]
    return (y_hat - test_.y).pow(2).mean().item<double>();
  }

  static std::vector<std::string> labels(const torch::Tensor& x) {
    auto cpu = x.to(torch::kCPU, torch::kDouble).contiguous();
    std::vector<std::string> out;
    for (int64_t i = 0; i < cpu.numel(); ++i) out.push_back(fmt::format("{:.2f}", cpu.data_ptr<double>()[i]));
    return out;
  }

  std::string variant_;
  int64_t epochs_;
  double lr_;
  bool half_;
  bool trains_ = false;
  NadarayaWatson model_{nullptr};
  Data train_, test_;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .choice("variant", &Config::variant, {"average", "nonparametric", "parametric"},
                  "average: mean of the training targets; nonparametric: Gaussian kernel, w = 1; parametric: "
                  "Gaussian kernel with a learnable w, trained")
          .node("scorer", &Config::scorer, config::Type::Any, "{}",
                "scorer plugin ({} = the variant's); trained when it has parameters. Queries and keys are scalars")
          .option("max_epochs", &Config::max_epochs,
                  "SGD epochs (full batch) when the scorer has parameters; otherwise one evaluation", {.min = 1})
          .option("lr", &Config::lr, "SGD learning rate", {.min = 0.0})
          .choice("loss", &Config::half_sse, {{"half_sse", true}, {"sse", false}},
                  "half_sse: sum of squared errors / 2; sse: the sum itself (d2l 0.17's PyTorch MSELoss(reduction="
                  "'none').sum())")
          .option("init_w", &Config::init_w,
                  "parametric variant's initial w (negative = U(0, 1) from the seed, as torch.rand)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext& ctx) {
  return std::make_shared<NadarayaWatsonTrainer>(binding().read(o), o, ctx);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "nadaraya_watson",
               "Nadaraya-Watson kernel regression (d2l 0.17 10.2): average, nonparametric or parametric pooling",
               schema, make)
