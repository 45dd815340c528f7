// Dataset plugin "kernel_regression": d2l 0.17's Nadaraya-Watson data (section 10.2), generated
// here from a seed: n_train points x ~ sorted(x_max * U(0, 1)), y = 2 sin x + x^0.8 + N(0, noise^2);
// test inputs 0, test_step, ... below x_max with the noise-free truth.
// Batches hold features: src [N, 1, 1] = x, tgt_out [N, 1, 1] = y (one step, one feature).
#include <attnlab/config/binding.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>

namespace {

using namespace attnlab;

struct Options {
  int64_t n_train = 50;
  double x_max = 5.0;
  double noise = 0.5;
  double test_step = 0.1;
  int64_t batch_size = 0;  // 0 = every point in one batch
  int64_t seed = -1;       // -1 = the experiment's seed
};

/// d2l's f(x) = 2 sin(x) + x^0.8. x [N] -> [N]
torch::Tensor truth(const torch::Tensor& x) { return 2 * torch::sin(x) + x.pow(0.8); }

class KernelRegression final : public data::Dataset {
 public:
  explicit KernelRegression(Options o) : opt_(o) {}

  void prepare(const std::string&) override {
    // Same draws in the same order as the book (rand, then normal), from our own generator so
    // the data depend on the seed only.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(opt_.seed));
    x_train_ = std::get<0>(torch::sort(torch::rand({opt_.n_train}, gen) * opt_.x_max));  // [n_train]
    y_train_ = truth(x_train_) + torch::normal(0.0, opt_.noise, {opt_.n_train}, gen);    // [n_train]
    x_test_ = torch::arange(0.0, opt_.x_max, opt_.test_step, torch::kFloat);             // [n_test]
    y_test_ = truth(x_test_);                                                            // [n_test]
  }

  plugin::DataInfo info() const override {
    plugin::DataInfo d;
    d.num_features = 1;
    d.num_steps = 1;
    // d2l's plot_kernel_reg axes: x over the inputs' range, y from -1 to 5.
    d.meta.set("x.range", std::vector<double>{0.0, opt_.x_max});
    d.meta.set("y.range", std::vector<double>{-1.0, 5.0});
    return d;
  }

  bool has_split(data::Split split) const override { return split != data::Split::Val; }

  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override {
    ATTNLAB_CHECK(x_train_.defined(), DataError, "kernel_regression: batches() called before prepare()");
    ATTNLAB_CHECK(has_split(split), DataError, "kernel_regression has train and test splits, not '{}'",
                  data::split_name(split));
    const bool train = split == data::Split::Train;
    const auto& x = train ? x_train_ : x_test_;  // [N]
    const auto& y = train ? y_train_ : y_test_;  // [N]
    const int64_t n = x.size(0);
    auto order = torch::arange(n);  // [N]
    if (train && shuffle) order = torch::randperm(n, at::make_generator<at::CPUGeneratorImpl>(seed));
    const int64_t size = opt_.batch_size > 0 ? opt_.batch_size : n;
    std::vector<data::Batch> out;
    for (int64_t start = 0; start < n; start += size) {
      auto rows = order.narrow(0, start, std::min(size, n - start));  // [b]
      data::Batch b;
      b.src = x.index_select(0, rows).view({-1, 1, 1});              // [b, 1, 1]
      b.tgt_out = y.index_select(0, rows).view({-1, 1, 1});          // [b, 1, 1]
      b.src_valid_lens = torch::ones({rows.size(0)}, torch::kLong);  // [b]
      b.tgt_valid_lens = b.src_valid_lens;                           // [b]
      out.push_back(std::move(b));
    }
    return out;
  }

 private:
  Options opt_;
  torch::Tensor x_train_, y_train_, x_test_, y_test_;
};

const config::Binding<Options>& binding() {
  static const auto b =
      config::Binding<Options>()
          .option("n_train", &Options::n_train, "training points", {.min = 2})
          .option("x_max", &Options::x_max, "inputs lie in [0, x_max)", {.min = 0.0})
          .option("noise", &Options::noise, "standard deviation of the training targets' Gaussian noise", {.min = 0.0})
          .option("test_step", &Options::test_step, "spacing of the test inputs 0, test_step, ... < x_max",
                  {.min = 1e-6})
          .option("batch_size", &Options::batch_size, "points per training batch (0 = all in one batch)", {.min = 0})
          .option("seed", &Options::seed, "generator seed (-1 = the experiment's seed)", {.min = -1});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  Options opt = binding().read(o);
  if (opt.test_step >= opt.x_max) {
    binding().fail(o, &Options::test_step,
                   fmt::format("test_step {} leaves no test input below x_max {}", opt.test_step, opt.x_max));
  }
  if (opt.seed < 0) opt.seed = static_cast<int64_t>(ctx.seed);
  return std::make_shared<KernelRegression>(opt);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "kernel_regression",
               "Noisy 2 sin x + x^0.8 on [0, 5) for Nadaraya-Watson kernel regression (d2l 0.17 10.2), seeded", schema,
               make)
