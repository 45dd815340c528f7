// Trainer "nadaraya_watson": d2l 0.17 section 10.2 as a model/trainer pair. There is no encoder or
// decoder: the trainer builds its NadarayaWatson model around a scorer from the registry
// (average pooling, the nonparametric Gaussian kernel, or the parametric one with a learnable w),
// trains it when the scorer has parameters (leave-one-out keys from the training set, SGD, summed
// squared error) through the framework's epoch loop (train/epoch_loop.hpp: data-parallel under
// torchrun, checkpoints and patience when asked), then writes test predictions, the truth and the
// attention matrix.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/train/attention_results.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/trainer.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

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

/// The Gaussian kernel's w (parameter or buffer "attention.scorer.w"); NaN for other scorers.
double kernel_w(const NadarayaWatson& model) {
  const std::string name = "attention.scorer.w";
  const auto params = model->named_parameters();
  if (const auto* p = params.find(name)) return p->item<double>();
  const auto buffers = model->named_buffers();
  if (const auto* b = buffers.find(name)) return b->item<double>();
  return std::nan("");
}

/// The test MSE with every training point as a key.
double test_mse(NadarayaWatson model, const Data& train, const Data& test) {
  torch::NoGradGuard no_grad;
  auto y_hat = model->forward_shared(test.x, train.x, train.y);  // [n_test]
  return (y_hat - test.y).pow(2).mean().item<double>();
}

/// The book's training as hooks of the epoch loop (attnlab/train/epoch_loop.hpp): every epoch one
/// full-batch step whose rows are the training points, each predicted from all the others
/// (leave-one-out keys); the loss is reported as it was before the step, w after it. A
/// data-parallel rank takes a contiguous part of the rows, with their key sets.
class NadarayaWatsonHooks final : public train::EpochHooks {
 public:
  NadarayaWatsonHooks(train::TrainContext& ctx, NadarayaWatson model, const Data& train, const Data& test, bool half,
                      bool trains)
      : ctx_(ctx), model_(std::move(model)), train_(train), test_(test), half_(half), trains_(trains) {
    const int64_t n = train.x.size(0);
    auto off_diagonal = torch::eye(n, torch::TensorOptions().dtype(torch::kBool).device(ctx.device)).logical_not();
    keys_ = train.x.repeat({n, 1}).masked_select(off_diagonal).view({n, n - 1});    // [n, n - 1]
    values_ = train.y.repeat({n, 1}).masked_select(off_diagonal).view({n, n - 1});  // [n, n - 1]
  }

  torch::nn::Module& module() override { return *model_; }

  std::vector<data::Batch> batches(const train::TrainContext&, int64_t) override {
    data::Batch all;  // the training points as one batch's rows: x [n], y [n]
    all.src = train_.x;
    all.tgt_out = train_.y;
    return {all};
  }

  void begin_epoch(int64_t) override {
    model_->train(trains_);
    loss_sum_ = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx_.device));
  }

  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare& share, bool) override {
    // {queries [r], their keys [r, n - 1], values [r, n - 1], targets [r]}
    return {rows.src, keys_.slice(0, share.begin, share.end), values_.slice(0, share.begin, share.end), rows.tgt_out};
  }

  /// The summed squared error (halved with loss: half_sse): a sum over the rows either way.
  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool) override {
    auto y_hat = model_->forward(in[0], in[1], in[2]);               // [r]
    return {(y_hat - in[3]).pow(2).sum() * (half_ ? 0.5 : 1.0)};  // scalar
  }

  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch&, const train::StepShare&) override {
    loss_sum_ += outs[0].to(torch::kDouble);
  }

  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    r.train["loss"] = end.sum({loss_sum_.item<double>()})[0];  // before this epoch's step, as the book prints it
    if (auto w = kernel_w(model_); !std::isnan(w)) r.train["w"] = w;
    if (ctx_.results != nullptr) ctx_.results->append_metric("test", "mse", test_mse(model_, train_, test_));
  }

 private:
  train::TrainContext& ctx_;
  NadarayaWatson model_;
  const Data& train_;
  const Data& test_;
  bool half_, trains_;
  torch::Tensor keys_, values_;  // [n, n - 1] each: row i leaves training point i out
  torch::Tensor loss_sum_;
};

struct Config : train::LoopConfig {
  std::string variant = "parametric";  // average | nonparametric | parametric
  config::Node scorer;                 // {} = the variant's
  int64_t max_epochs = 5;
  double lr = 0.5;
  bool half_sse = true;  // loss: half_sse | sse
  double init_w = -1.0;
};

class NadarayaWatsonTrainer final : public train::Trainer {
 public:
  NadarayaWatsonTrainer(const Config& c, const config::Options& o, const plugin::BuildContext& ctx) : c_(c) {
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

  int64_t max_epochs() const override { return trains_ ? c_.max_epochs : 1; }
  bool can_resume() const override { return c_.checkpoints; }
  bool supports_distributed() const override { return true; }
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
    std::unique_ptr<torch::optim::SGD> opt;
    if (trains_) opt = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(c_.lr));
    NadarayaWatsonHooks hooks(ctx, model_, train_, test_, c_.half_sse, trains_);
    // torch's SGD steps eagerly: TrainStep's CUDA graphs need FusedAdam, so this trainer has none.
    return train::run_epochs(ctx, hooks, opt.get(),
                             {.who = "nadaraya_watson",
                              .max_epochs = max_epochs(),
                              .loop = c_,
                              .step = {.graphs = train::CudaGraphs::Off, .precision = ctx.precision},
                              .record_graphs = false,
                              .schedule = {.lr = c_.lr}});
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
    const double w = kernel_w(model_);
    if (!std::isnan(w)) res.set_attr("kernel_w", w);
    res.flush();
    std::cout << fmt::format("nadaraya_watson {}: test MSE {:.4f}, mean attention entropy {:.3f} nats{}", c_.variant,
                             mse, entropy, std::isnan(w) ? std::string() : fmt::format(", w {:.3f}", w))
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

  static std::vector<std::string> labels(const torch::Tensor& x) {
    auto cpu = x.to(torch::kCPU, torch::kDouble).contiguous();
    std::vector<std::string> out;
    for (int64_t i = 0; i < cpu.numel(); ++i) out.push_back(fmt::format("{:.2f}", cpu.data_ptr<double>()[i]));
    return out;
  }

  Config c_;
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
                  "parametric variant's initial w (negative = U(0, 1) from the seed, as torch.rand)")
          .include(train::checkpoint_options("lowest training loss"))
          .include(train::patience_option("the training loss"));
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext& ctx) {
  const Config c = binding().read(o);
  train::check_loop_options(c, o);
  return std::make_shared<NadarayaWatsonTrainer>(c, o, ctx);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "nadaraya_watson",
               "Nadaraya-Watson kernel regression (d2l 0.17 10.2): average, nonparametric or parametric pooling",
               schema, make)
