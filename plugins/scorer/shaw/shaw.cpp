// Scorer plugin "shaw": relative position representations (Shaw, Uszkoreit and Vaswani, "Self-
// Attention with Relative Position Representations", NAACL 2018), on the key side:
//
//   score(i, j) = q_i . (k_j + w[clip(j - i, -max_distance, max_distance)]) / sqrt(d)
//
// with w a learned table [2 max_distance + 1, d] of per-head size d, shared by the heads of the
// module (as in the paper) and zero at the start (an untrained model scores as dot_product).
// Distances beyond max_distance share the table's ends. The paper also adds a value-side table
// to the pooled values (a^V); a scorer only scores, so that half is not here.
//
// Computed without the [Q, K, d] tensor of the paper's notation: q_i . w[r] for every r once
// ([B, Q, 2 max_distance + 1]), then gathered by each (i, j)'s clipped distance; the fused path
// passes that as SDPA's additive bias, so recorded and fused paths agree. Self-attention only.
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

class Shaw final : public nn::Scorer {
 public:
  Shaw(int64_t size, int64_t max_distance) : max_distance_(max_distance) {
    table_ = register_parameter("relative_keys", torch::zeros({2 * max_distance + 1, size}));  // [2 k + 1, d]
  }

  /// queries [B, Q, D], keys [B, K, D] -> (q k^T + q w_rel^T) / sqrt(D) [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys,
                      const nn::Positions& positions) override {
    check(queries, keys);
    auto scores = torch::bmm(queries, keys.transpose(1, 2));  // [B, Q, K]
    return (scores + relative(queries, keys.size(1), positions)) / std::sqrt(static_cast<double>(queries.size(-1)));
  }

  /// The same through SDPA, the relative term as its additive bias. -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override {
    check(queries, keys);
    auto bias = relative(queries, keys.size(1), positions) / std::sqrt(static_cast<double>(queries.size(-1)));
    return nn::scaled_dot_product_attend(queries, keys, values, valid_lens, bias, training ? dropout : 0.0);
  }

  /// Its scores carry the positions (a learned key vector per clipped relative distance):
  /// a transformer under positional_encoding `auto` adds no absolute encoding.
  bool encodes_positions() const override { return true; }

 private:
  void check(const torch::Tensor& queries, const torch::Tensor& keys) const {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "shaw: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ", keys.sizes());
    TORCH_CHECK(queries.size(2) == table_.size(1), "shaw: built for a per-head size of ", table_.size(1),
                ", found queries of size ", queries.size(2));
  }

  /// q_i . w[clip(j - i)] for query rows at query_offset.. and key columns at key_offset.. -> [B, Q, K]
  torch::Tensor relative(const torch::Tensor& queries, int64_t keys, const nn::Positions& positions) const {
    const int64_t B = queries.size(0), Q = queries.size(1);
    auto per_distance = torch::matmul(queries, table_.to(queries.scalar_type()).t());  // [B, Q, 2 k + 1]
    const auto opts = torch::TensorOptions(torch::kLong).device(queries.device());
    auto i = torch::arange(positions.query_offset, positions.query_offset + Q, opts).unsqueeze(1);  // [Q, 1]
    auto j = torch::arange(positions.key_offset, positions.key_offset + keys, opts).unsqueeze(0);   // [1, K]
    auto index = (j - i).clamp(-max_distance_, max_distance_) + max_distance_;                      // [Q, K]
    return per_distance.gather(2, index.unsqueeze(0).expand({B, Q, keys}));                        // [B, Q, K]
  }

  int64_t max_distance_;
  torch::Tensor table_;  // [2 max_distance + 1, d]: w[r + max_distance] for clipped distance r
};

struct Config {
  int64_t max_distance = 16;
};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>().option(
      "max_distance", &Config::max_distance,
      "the clipping distance k: distances j - i beyond +-k share the table's ends (2 k + 1 learned vectors)",
      {.min = 1, .max = 1 << 20});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  scorer_checks::require_self_attention(options, sc, "a learned vector per distance between positions in one sequence");
  scorer_checks::require_equal_sizes(options, sc);
  ATTNLAB_CHECK(sc.query_size >= 1, ConfigError, "{}: {} needs the per-head size to size its table, found {}",
                options.resolved().where(), options.owner(), sc.query_size);
  const Config c = binding().read(options);
  return std::make_shared<Shaw>(sc.query_size, c.max_distance);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "shaw",
               "Relative position representations (Shaw et al. 2018), key side: q . (k_j + w[clip(j - i)]) / sqrt(d) "
               "with a learned vector per clipped distance",
               schema, make)
