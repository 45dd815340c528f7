// Scorer plugin "alibi": Attention with Linear Biases (Press, Smith and Lewis, "Train Short, Test
// Long", ICLR 2022). Scaled dot-product scores plus a per-head bias that falls linearly with the
// distance between query position i and key position j:
//
//   score_h(i, j) = q_i . k_j / sqrt(d) - m_h |i - j|      (symmetric: true, the default)
//   score_h(i, j) = q_i . k_j / sqrt(d) - m_h (i - j)      (symmetric: false, the paper's form)
//
// The paper defines ALiBi for causal self-attention (a decoder), where j <= i and both forms agree.
// Encoder self-attention and cross-attention also see keys after the query, where the paper's
// form would reward distance, so the symmetric form is the default and symmetric: false is refused
// outside causal self-attention. In cross-attention i is the target position and j the source
// position: a prior for monotonic alignment.
//
// Slopes: m_h = 2^(-8h/n), h = 1..n, for n heads a power of two; otherwise the slopes of the
// closest smaller power of two c, then every other slope of 2c (h = 1, 3, 5, ...), n - c of them
// (the authors' get_slopes, HF's build_alibi_tensor). Heads are folded into the batch (row r is
// head r % n, nn/scorer.hpp), so row r gets slope m_{r % n + 1}.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/types.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace attnlab;

/// The n slopes m_1..m_n, as the paper's authors compute them.
std::vector<double> alibi_slopes(int64_t n) {
  int64_t closest = 1;  // the largest power of two <= n
  while (closest * 2 <= n) closest *= 2;
  const auto geometric = [](int64_t count) {  // 2^(-8/count), its square, ..., its count-th power
    std::vector<double> out;
    for (int64_t h = 1; h <= count; ++h) out.push_back(std::pow(2.0, -8.0 * static_cast<double>(h) / count));
    return out;
  };
  std::vector<double> slopes = geometric(closest);
  const std::vector<double> finer = geometric(2 * closest);
  for (int64_t h = 0; h < n - closest; ++h) slopes.push_back(finer[2 * h]);
  return slopes;
}

class Alibi final : public nn::Scorer {
 public:
  Alibi(int64_t num_heads, bool symmetric, bool scale) : symmetric_(symmetric), scale_(scale) {
    slopes_ = register_buffer("slopes", torch::tensor(alibi_slopes(num_heads), torch::kFloat));  // [heads]
  }

  /// queries [B, Q, D], keys [B, K, D] (B = sequences * heads) -> q k^T / sqrt(D) + bias [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys,
                      const nn::Positions& positions) override {
    check(queries, keys);
    auto scores = torch::bmm(queries, keys.transpose(1, 2));  // [B, Q, K]
    if (scale_) scores = scores / std::sqrt(static_cast<double>(queries.size(-1)));
    return scores + batch_bias(queries.size(0), queries.size(1), keys.size(1), positions, scores.scalar_type());
  }

  /// The same through SDPA, with the bias as an additive mask. -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override {
    check(queries, keys);
    auto bias = batch_bias(queries.size(0), queries.size(1), keys.size(1), positions, queries.scalar_type());
    return nn::scaled_dot_product_attend(queries, keys, values, valid_lens, bias, training ? dropout : 0.0,
                                         scale_ ? std::nullopt : std::optional<double>(1.0));
  }

  /// Its scores carry the positions (a bias linear in the query-key distance):
  /// a transformer under positional_encoding `auto` adds no absolute encoding.
  bool encodes_positions() const override { return true; }

 private:
  int64_t heads() const { return slopes_.size(0); }

  void check(const torch::Tensor& queries, const torch::Tensor& keys) const {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "alibi: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ", keys.sizes());
    TORCH_CHECK(queries.size(0) % heads() == 0, "alibi: built for ", heads(),
                " heads folded into the batch, but the batch of ", queries.size(0), " rows is no multiple of it");
  }

  /// -m_h |i - j| (or -m_h (i - j)) for query rows at query_offset.. and key columns at
  /// key_offset.. -> [heads, Q, K]
  torch::Tensor bias(int64_t queries, int64_t keys, const nn::Positions& positions) const {
    const auto opts = slopes_.options();  // float, on the model's device
    auto i = torch::arange(positions.query_offset, positions.query_offset + queries, opts);  // [Q]
    auto j = torch::arange(positions.key_offset, positions.key_offset + keys, opts);         // [K]
    auto distance = i.unsqueeze(1) - j.unsqueeze(0);                                         // [Q, K]
    if (symmetric_) distance = distance.abs();
    return -slopes_.view({-1, 1, 1}) * distance.unsqueeze(0);  // [heads, Q, K]
  }

  /// bias() for every row of a [B, Q, K] batch, row r being head r % heads -> [B, Q, K]
  torch::Tensor batch_bias(int64_t batch, int64_t queries, int64_t keys, const nn::Positions& positions,
                           torch::ScalarType dtype) const {
    auto per_head = bias(queries, keys, positions).to(dtype);  // [heads, Q, K]
    return per_head.unsqueeze(0).expand({batch / heads(), heads(), queries, keys}).reshape({batch, queries, keys});
  }

  torch::Tensor slopes_;  // [heads] m_1..m_n
  bool symmetric_, scale_;
};

struct Config {
  bool symmetric = true;
  bool scale = true;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("symmetric", &Config::symmetric,
                  "bias -m |i - j|: distance either way costs (encoders, cross-attention); false = the paper's "
                  "-m (i - j), for causal self-attention only (where both agree)")
          .option("scale", &Config::scale, "divide q . k by sqrt(d) (the paper's scaled dot product)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size <= 0 || sc.key_size <= 0 || sc.query_size == sc.key_size, ConfigError,
                "{}: {} scores dot products, so queries and keys need one size, found query size {} and key size {}",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  ATTNLAB_CHECK(sc.num_heads >= 1, ConfigError, "{}: {} needs num_heads >= 1, found {}", options.resolved().where(),
                options.owner(), sc.num_heads);
  const Config c = binding().read(options);
  const bool causal_self = sc.role == nn::ScorerContext::Role::Self && sc.causal;
  if (!c.symmetric && !causal_self) {
    binding().fail(options, &Config::symmetric,
                   fmt::format("symmetric: false (the paper's -m (i - j)) is for causal self-attention only, but {} "
                               "uses this scorer for {}attention, where keys after the query would gain weight with "
                               "distance",
                               sc.owner.empty() ? std::string("its module") : sc.owner,
                               sc.role == nn::ScorerContext::Role::Self ? "non-causal self-" : "cross-"));
  }
  return std::make_shared<Alibi>(sc.num_heads, c.symmetric, c.scale);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "alibi",
               "ALiBi (Press et al. 2022): scaled dot product minus a per-head slope times the distance |i - j| "
               "between query and key positions",
               schema, make)
