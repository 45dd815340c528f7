// Dataset plugin "noisy_sine", built out of tree against the installed SDK: y = amplitude *
// sin(x) + N(0, noise^2) at n_train sorted points x ~ U(0, 2 pi periods), and the noise-free
// curve at test inputs spread over the same range, as scalar features (src [N, 1, 1] = x,
// tgt_out [N, 1, 1] = y) for the nadaraya_watson trainer.
//
// Besides its batches it keeps its own data with the run and declares the figures that draw it
// (Dataset::write_results, attnlab/results/figure.hpp): the noise-free curve with the training
// samples on it, and a table of the first samples with their noise. `runner plot` and `runner
// report` draw both from the declarations; neither tool knows this plugin. Its metadata gives the
// axes' ranges (x.range, y.range), which the trainer's kernel_regression figure uses too.
#include <attnlab/config/binding.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/tensor.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>
#include <numbers>

namespace {

using namespace attnlab;

struct Options {
  int64_t n_train = 50;
  double periods = 1.0;  // x in [0, 2 pi periods)
  double amplitude = 1.0;
  double noise = 0.3;  // standard deviation of the training targets' noise
  int64_t test_points = 100;
  int64_t seed = -1;  // -1 = the experiment's seed
};

constexpr const char* kData = "data/noisy_sine";  // where its own data goes in the results file
constexpr int64_t kTableRows = 12;                // samples in its table figure

class NoisySine final : public data::Dataset {
 public:
  explicit NoisySine(Options o) : opt_(o), x_max_(2 * std::numbers::pi * o.periods) {}

  void prepare(const std::string&) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(opt_.seed));
    x_train_ = std::get<0>(torch::sort(torch::rand({opt_.n_train}, gen) * x_max_));  // [n_train]
    noise_ = torch::normal(0.0, opt_.noise, {opt_.n_train}, gen);                    // [n_train]
    y_train_ = truth(x_train_) + noise_;                                             // [n_train]
    x_test_ = torch::linspace(0.0, x_max_, opt_.test_points);                        // [test_points]
    y_test_ = truth(x_test_);                                                        // [test_points]
  }

  plugin::DataInfo info() const override {
    plugin::DataInfo d;
    d.num_features = 1;
    d.num_steps = 1;
    const double top = opt_.amplitude + 3 * opt_.noise;  // where nearly every sample lies
    d.meta.set("x.range", std::vector<double>{0.0, x_max_});
    d.meta.set("y.range", std::vector<double>{-top, top});
    return d;
  }

  bool has_split(data::Split split) const override { return split != data::Split::Val; }

  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override {
    ATTNLAB_CHECK(x_train_.defined(), DataError, "noisy_sine: batches() called before prepare()");
    ATTNLAB_CHECK(has_split(split), DataError, "noisy_sine has train and test splits, not '{}'",
                  data::split_name(split));
    const bool train = split == data::Split::Train;
    auto x = train ? x_train_ : x_test_, y = train ? y_train_ : y_test_;  // [N]
    if (train && shuffle) {
      const auto order = torch::randperm(x.size(0), at::make_generator<at::CPUGeneratorImpl>(seed));
      x = x.index_select(0, order);
      y = y.index_select(0, order);
    }
    data::Batch b;
    b.src = x.view({-1, 1, 1});                                 // [N, 1, 1]
    b.tgt_out = y.view({-1, 1, 1});                             // [N, 1, 1]
    b.src_valid_lens = torch::ones({x.size(0)}, torch::kLong);  // [N]
    b.tgt_valid_lens = b.src_valid_lens;
    return {b};
  }

  void write_results(results::Results& res) const override {
    const std::string at = kData;
    const auto dense = torch::linspace(0.0, x_max_, 400);  // [400] the curve, smooth
    results::write_tensor(res, at + "/x", dense);
    results::write_tensor(res, at + "/truth", truth(dense));
    results::write_tensor(res, at + "/x_train", x_train_);
    results::write_tensor(res, at + "/y_train", y_train_);
    const int64_t rows = std::min(kTableRows, opt_.n_train);
    results::write_tensor(res, at + "/first/x", x_train_.narrow(0, 0, rows));
    results::write_tensor(res, at + "/first/y", y_train_.narrow(0, 0, rows));
    results::write_tensor(res, at + "/first/noise", noise_.narrow(0, 0, rows));

    const auto meta = info().meta;
    results::Figure curve;
    curve.name = "noisy_sine";
    curve.title = "noisy_sine: the function and its training samples";
    curve.xlabel = "x";
    curve.ylabel = "y";
    curve.xlim = meta.range("x.range");
    curve.ylim = meta.range("y.range");
    curve.layers = {{.label = "amplitude sin(x)", .x = at + "/x", .y = at + "/truth"},
                    {.label = "training samples",
                     .x = at + "/x_train",
                     .y = at + "/y_train",
                     .style = results::Style::points,
                     .marker = results::Marker::dot}};
    results::declare_figure(res, curve, "dataset 'noisy_sine'");

    results::Figure table;
    table.name = "noisy_sine_samples";
    table.kind = results::FigureKind::table;
    table.title = fmt::format("noisy_sine: the first {} of {} training samples", rows, opt_.n_train);
    table.layers = {{.label = "x", .data = at + "/first/x"},
                    {.label = "y", .data = at + "/first/y"},
                    {.label = "noise", .data = at + "/first/noise"}};
    results::declare_figure(res, table, "dataset 'noisy_sine'");
  }

 private:
  torch::Tensor truth(const torch::Tensor& x) const { return opt_.amplitude * torch::sin(x); }

  Options opt_;
  double x_max_;
  torch::Tensor x_train_, y_train_, noise_, x_test_, y_test_;
};

const config::Binding<Options>& binding() {
  static const auto b =
      config::Binding<Options>()
          .option("n_train", &Options::n_train, "training samples", {.min = 2, .max = 1'000'000})
          .option("periods", &Options::periods, "inputs lie in [0, 2 pi periods)", {.min = 0.01, .max = 1000.0})
          .option("amplitude", &Options::amplitude, "the sine's amplitude", {.min = 0.0})
          .option("noise", &Options::noise, "standard deviation of the training targets' Gaussian noise", {.min = 0.0})
          .option("test_points", &Options::test_points, "noise-free test inputs spread over the range",
                  {.min = 2, .max = 1'000'000})
          .option("seed", &Options::seed, "generator seed (-1 = the experiment's seed)", {.min = -1});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  Options opt = binding().read(o);
  if (opt.seed < 0) opt.seed = static_cast<int64_t>(ctx.seed);
  return std::make_shared<NoisySine>(opt);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "noisy_sine",
               "a noisy sine for kernel regression, with figures of its own (the out-of-tree dataset example)", schema,
               make)
