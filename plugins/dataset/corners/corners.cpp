// Dataset plugin "corners": Step-by-Step ch. 10's corner sequences as seq2seq regression data.
// Source = the first 2 points, target = the last 2 (teacher-forcing input: last source point +
// target[:-1]). The validation split is the test set, as the book validates on its test loader.
// The directions are kept as labels (data::SequenceLabels).
#include "corner_sequences.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/labels.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/regression.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

namespace {
using namespace attnlab;

constexpr int64_t kSourceLen = 2;  // points given to the encoder
constexpr int64_t kTargetLen = 2;  // points to predict

struct SplitData {
  torch::Tensor src;         // [N, 2, 2]
  torch::Tensor tgt;         // [N, 2, 2] (0 where padded)
  torch::Tensor tgt_lens;    // [N] 0..2
  torch::Tensor directions;  // [N] 1 = clockwise
};

struct Config {
  int64_t n = 128;
  int64_t seed = 13;
  int64_t test_n = 128;
  int64_t test_seed = 17;
  int64_t batch_size = 16;
  double noise = 0.1;
  bool variable_len = false;
};

class Corners final : public data::Dataset, public data::SequenceLabels {
 public:
  explicit Corners(const Config& c)
      : n_(c.n),
        seed_(c.seed),
        test_n_(c.test_n),
        test_seed_(c.test_seed),
        batch_size_(c.batch_size),
        noise_(c.noise),
        variable_len_(c.variable_len) {}

  void prepare(const std::string&) override {
    train_ = make_split(n_, seed_);
    test_ = make_split(test_n_, test_seed_);
  }

  plugin::DataInfo info() const override {
    plugin::DataInfo info;
    info.num_features = 2;
    info.num_steps = kTargetLen;
    // The points are corners of the square [-1, 1]^2 (with noise): whoever draws them in the plane
    // draws that square behind them, in a frame a little wider (the regression trainer's figure).
    info.meta.set("points.outline", std::vector<double>{-1, -1, -1, 1, 1, 1, 1, -1, -1, -1});
    info.meta.set("x.range", std::vector<double>{-1.6, 1.6});
    info.meta.set("y.range", std::vector<double>{-1.6, 1.6});
    return info;
  }

  bool has_split(data::Split) const override { return true; }

  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override {
    const auto& d = data_of(split);
    const int64_t n = d.src.size(0);
    auto order = shuffle ? torch::randperm(n, at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong)
                         : torch::arange(n, torch::kLong);  // [N]
    std::vector<data::Batch> out;
    for (int64_t start = 0; start < n; start += batch_size_) {
      auto idx = order.narrow(0, start, std::min(batch_size_, n - start));  // [B]
      data::Batch b;
      b.src = d.src.index_select(0, idx);                                       // [B, 2, 2]
      b.src_valid_lens = torch::full({idx.size(0)}, kSourceLen, torch::kLong);  // [B]
      b.tgt_out = d.tgt.index_select(0, idx);                                   // [B, 2, 2]
      b.tgt_in = nn::shift_target(b.src, b.tgt_out);                            // [B, 2, 2]
      b.tgt_valid_lens = d.tgt_lens.index_select(0, idx);                       // [B]
      out.push_back(std::move(b));
    }
    return out;
  }

  // --- SequenceLabels
  std::string label_name() const override { return "directions"; }
  std::vector<std::string> label_values() const override { return {"counter-clockwise", "clockwise"}; }
  torch::Tensor labels(data::Split split) const override { return data_of(split).directions; }

 private:
  SplitData make_split(int64_t n, int64_t seed) const {
    auto seqs = datasets::corners::generate_corners(n, static_cast<uint64_t>(seed), variable_len_, noise_);
    SplitData d;
    d.src = seqs.points.narrow(1, 0, kSourceLen).contiguous();           // [N, 2, 2]
    d.tgt = seqs.points.narrow(1, kSourceLen, kTargetLen).contiguous();  // [N, 2, 2]
    d.tgt_lens = (seqs.lengths - kSourceLen).clamp_min(0);               // [N]
    d.directions = seqs.directions;
    return d;
  }

  const SplitData& data_of(data::Split split) const {
    ATTNLAB_CHECK(train_.src.defined(), DataError, "dataset 'corners': batches() called before prepare()");
    return split == data::Split::Train ? train_ : test_;  // validation = the test set (the book's val loader)
  }

  int64_t n_, seed_, test_n_, test_seed_, batch_size_;
  double noise_;
  bool variable_len_;
  SplitData train_, test_;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("n", &Config::n, "training sequences", {.min = 1})
          .option("seed", &Config::seed, "seed of the training sequences (our generator, not NumPy's stream)",
                  {.min = 0})
          .option("test_n", &Config::test_n, "test sequences (also the validation split, as in the book)", {.min = 1})
          .option("test_seed", &Config::test_seed, "seed of the test sequences", {.min = 0})
          .option("batch_size", &Config::batch_size, "sequences per mini-batch", {.min = 1})
          .option("noise", &Config::noise, "standard deviation of the noise added to every coordinate", {.min = 0.0})
          .option("variable_len", &Config::variable_len,
                  "2..4 points per sequence (targets padded; tgt_valid_lens 0..2)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<Corners>(binding().read(o));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "corners",
               "Step-by-Step ch. 10 corner sequences: 2 points in, the next 2 out (directions kept as labels)", schema,
               make)
