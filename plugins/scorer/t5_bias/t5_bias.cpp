// Scorer plugin "t5_bias": T5's relative position bias (Raffel et al., "Exploring the Limits of
// Transfer Learning with a Unified Text-to-Text Transformer", JMLR 2020). Scaled dot-product scores
// plus a learned scalar per head and bucket of the relative position j - i (key minus query):
//
//   score_h(i, j) = q_i . k_j / sqrt(d) + b[bucket(j - i), h]
//
// Buckets as T5's _relative_position_bucket (Mesh TensorFlow, Hugging Face's T5Attention):
// non-causal self-attention (an encoder) is bidirectional, half the buckets for keys after the
// query (j > i) and half for the rest; causal self-attention (a decoder) is unidirectional, every
// bucket for j <= i. Within a direction's n buckets, distances below n/2 get a bucket each, larger
// ones share n/2 log-spaced buckets up to max_distance, and everything farther the last one.
//
// One table b [num_buckets, heads] per attention module (T5 shares one per stack, made in the first
// layer), zero at the start, so an untrained model scores as dot_product does. T5 leaves the dot
// product unscaled (its initialisation folds 1/sqrt(d) into W_q); here it is scaled, as the other
// scorers of this framework. Heads are folded into the batch (nn/scorer.hpp): row r is head r % h.
// Relative positions have no meaning across two sequences, so role Cross is refused.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include "../common/self_attention_checks.hpp"

#include <torch/types.h>

#include <cmath>
#include <optional>
#include <string>

namespace {

using namespace attnlab;

/// T5's _relative_position_bucket: relative positions j - i (int64, any shape) -> buckets 0..num_buckets-1,
/// computed with the reference's float32 operations so that the buckets at the log-spaced edges agree.
torch::Tensor relative_position_bucket(const torch::Tensor& relative, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
  auto buckets = torch::zeros_like(relative);
  auto distance = relative;
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + (relative > 0).to(torch::kLong) * num_buckets;  // keys after the query: the upper half
    distance = relative.abs();
  } else {
    distance = -torch::min(relative, torch::zeros_like(relative));  // keys after the query: distance 0
  }
  const int64_t max_exact = num_buckets / 2;
  auto large =
      (torch::log(distance.to(torch::kFloat) / max_exact) /
       std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) * (num_buckets - max_exact))
          .to(torch::kLong) +
      max_exact;
  large = torch::clamp_max(large, num_buckets - 1);
  return buckets + torch::where(distance < max_exact, distance, large);
}

class T5Bias final : public nn::Scorer {
 public:
  T5Bias(int64_t num_heads, int64_t num_buckets, int64_t max_distance, bool bidirectional)
      : num_buckets_(num_buckets), max_distance_(max_distance), bidirectional_(bidirectional) {
    table_ = register_parameter("relative_attention_bias", torch::zeros({num_buckets, num_heads}));  // [buckets, heads]
  }

  /// queries [B, Q, D], keys [B, K, D] (B = sequences * heads) -> q k^T / sqrt(D) + b [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys,
                      const nn::Positions& positions) override {
    check(queries, keys);
    auto scores = torch::bmm(queries, keys.transpose(1, 2)) / std::sqrt(static_cast<double>(queries.size(-1)));
    return scores + batch_bias(queries.size(0), queries.size(1), keys.size(1), positions, scores.scalar_type());
  }

  /// The same through SDPA, with the bias as an additive mask. -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override {
    check(queries, keys);
    auto bias = batch_bias(queries.size(0), queries.size(1), keys.size(1), positions, queries.scalar_type());
    return nn::scaled_dot_product_attend(queries, keys, values, valid_lens, bias, training ? dropout : 0.0);
  }

  /// bucket(j - i) for query rows at query_offset.. and key columns at key_offset.. -> [Q, K] int64
  torch::Tensor buckets(int64_t queries, int64_t keys, const nn::Positions& positions) const {
    const auto opts = torch::TensorOptions().dtype(torch::kLong).device(table_.device());
    auto i = torch::arange(positions.query_offset, positions.query_offset + queries, opts);  // [Q]
    auto j = torch::arange(positions.key_offset, positions.key_offset + keys, opts);         // [K]
    return relative_position_bucket(j.unsqueeze(0) - i.unsqueeze(1), bidirectional_, num_buckets_, max_distance_);
  }

  /// Its scores carry the positions (a learned bias per bucket of relative position):
  /// a transformer under positional_encoding `auto` adds no absolute encoding.
  bool encodes_positions() const override { return true; }

 private:
  int64_t heads() const { return table_.size(1); }

  void check(const torch::Tensor& queries, const torch::Tensor& keys) const {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "t5_bias: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ", keys.sizes());
    TORCH_CHECK(queries.size(0) % heads() == 0, "t5_bias: built for ", heads(),
                " heads folded into the batch, but the batch of ", queries.size(0), " rows is no multiple of it");
  }

  /// b[bucket(j - i), h] for every row of a [B, Q, K] batch, row r being head r % heads -> [B, Q, K]
  torch::Tensor batch_bias(int64_t batch, int64_t queries, int64_t keys, const nn::Positions& positions,
                           torch::ScalarType dtype) const {
    auto bucket = buckets(queries, keys, positions);                                          // [Q, K]
    auto per_head = table_.index_select(0, bucket.flatten()).view({queries, keys, heads()});  // [Q, K, heads]
    per_head = per_head.permute({2, 0, 1}).to(dtype);                                         // [heads, Q, K]
    return per_head.unsqueeze(0).expand({batch / heads(), heads(), queries, keys}).reshape({batch, queries, keys});
  }

  torch::Tensor table_;  // [num_buckets, heads] b, learned
  int64_t num_buckets_, max_distance_;
  bool bidirectional_;
};

struct Config {
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("num_buckets", &Config::num_buckets,
                  "relative position buckets (T5's 32); bidirectional (an encoder) gives half to each direction",
                  {.min = 2, .max = 1 << 16})
          .option("max_distance", &Config::max_distance,
                  "distance of the last log-spaced bucket; farther ones share it (T5's 128)",
                  {.min = 1, .max = 1 << 30});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  scorer_checks::require_self_attention(options, sc, "a bias per distance between positions in one sequence");
  scorer_checks::require_equal_sizes(options, sc);
  ATTNLAB_CHECK(sc.num_heads >= 1, ConfigError, "{}: {} needs num_heads >= 1, found {}", options.resolved().where(),
                options.owner(), sc.num_heads);
  const Config c = binding().read(options);
  const bool bidirectional = !sc.causal;
  // Exact buckets per direction: half of a direction's buckets (T5's max_exact).
  const int64_t exact = (bidirectional ? c.num_buckets / 2 : c.num_buckets) / 2;
  if (exact < 1) {
    binding().fail(options, &Config::num_buckets,
                   fmt::format("num_buckets {} leaves no exact bucket per direction in {}'s {}self-attention (it "
                               "needs at least {})",
                               c.num_buckets, scorer_checks::user(sc), bidirectional ? "non-causal " : "causal ", bidirectional ? 4 : 2));
  }
  if (c.max_distance <= exact) {
    binding().fail(options, &Config::max_distance,
                   fmt::format("max_distance {} must exceed the {} distances with a bucket each (num_buckets {} in "
                               "{}self-attention), where the log-spaced buckets begin",
                               c.max_distance, exact, c.num_buckets, bidirectional ? "non-causal " : "causal "));
  }
  return std::make_shared<T5Bias>(sc.num_heads, c.num_buckets, c.max_distance, bidirectional);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "t5_bias",
               "T5's relative position bias (Raffel et al. 2020): scaled dot product plus a learned bias per head "
               "and bucket of the key-minus-query distance; self-attention only",
               schema, make)
