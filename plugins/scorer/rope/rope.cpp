// Scorer plugin "rope": rotary position embedding (Su et al., "RoFormer: Enhanced Transformer with
// Rotary Position Embedding", 2021). Queries and keys are rotated by angles proportional to their
// absolute positions before a scaled dot product, so the score depends on the positions only
// through their difference:
//
//   score(i, j) = R(i) q_i . R(j) k_j / sqrt(d) = q_i . R(j - i) k_j / sqrt(d)
//
// R(p) rotates feature pair n by the angle p theta_n, theta_n = base^(-2n/d), n = 0..d/2-1 (d the
// per-head size). Pairing: half-split ("rotate_half", GPT-NeoX and Hugging Face Llama): pair n is
// features (n, n + d/2), R(p) x = x cos(p theta) + rotate_half(x) sin(p theta) with rotate_half(x) =
// (-x[d/2:], x[:d/2]). The paper pairs adjacent features (2n, 2n + 1); both give the same scores up
// to a fixed permutation of the features, which the learned projections absorb.
//
// Every head is rotated alike (heads are folded into the batch, nn/scorer.hpp), so the scorer needs
// no head count. The cos/sin tables are cached on the inputs' device, for positions 0..N-1, and
// grown (doubling) when a call reaches past N; angles are computed in double, kept in float. RoPE is for
// self-attention: in cross-attention query and key positions count in different sequences, so the
// scorer refuses role Cross.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include "../common/self_attention_checks.hpp"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace {

using namespace attnlab;

class Rope final : public nn::Scorer {
 public:
  explicit Rope(double base) : base_(base) {}

  /// queries [B, Q, d], keys [B, K, d] -> R(i) q . R(j) k / sqrt(d) [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys,
                      const nn::Positions& positions) override {
    check(queries, keys);
    auto q = rotate(queries, positions.query_offset), k = rotate(keys, positions.key_offset);
    return torch::bmm(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(queries.size(-1)));  // [B, Q, K]
  }

  /// The rotated queries and keys through SDPA (nn::scaled_dot_product_attend). -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override {
    check(queries, keys);
    return nn::scaled_dot_product_attend(rotate(queries, positions.query_offset), rotate(keys, positions.key_offset),
                                         values, valid_lens, {}, training ? dropout : 0.0);
  }

  /// Its scores carry the positions (queries and keys are rotated by their positions):
  /// a transformer under positional_encoding `auto` adds no absolute encoding.
  bool encodes_positions() const override { return true; }

 private:
  static void check(const torch::Tensor& queries, const torch::Tensor& keys) {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "rope: expected queries [B, Q, d] and keys [B, K, d], found ", queries.sizes(), " and ", keys.sizes());
    TORCH_CHECK(queries.size(2) % 2 == 0, "rope: rotates pairs of features, so it needs an even size, found ",
                queries.size(2));
  }

  /// x [B, T, d], row t at position offset + t -> R(offset + t) x_t [B, T, d]
  torch::Tensor rotate(const torch::Tensor& x, int64_t offset) {
    TORCH_CHECK(offset >= 0, "rope: positions start at 0, found offset ", offset);
    const int64_t length = x.size(1), half = x.size(2) / 2;
    grow(offset + length, x.size(2), x.device(), x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat);
    auto cos = cos_.narrow(0, offset, length).to(x.scalar_type());                        // [T, d]
    auto sin = sin_.narrow(0, offset, length).to(x.scalar_type());                        // [T, d]
    auto rotated_half = torch::cat({-x.narrow(2, half, half), x.narrow(2, 0, half)}, 2);  // [B, T, d]
    return x * cos + rotated_half * sin;
  }

  /// Makes cos_ and sin_ [N, d] cover positions 0..length-1 for size d on `device` in `dtype`
  /// (float, or double for double inputs; a half-precision input gets them cast per call). The
  /// angles are computed in double on the device itself (no host copy).
  void grow(int64_t length, int64_t d, const torch::Device& device, torch::ScalarType dtype) {
    const bool fits = cos_.defined() && cos_.size(0) >= length && cos_.size(1) == d && cos_.device() == device &&
                      cos_.scalar_type() == dtype;
    if (fits) return;
    const int64_t n = std::max<int64_t>({length, cos_.defined() ? 2 * cos_.size(0) : 0, 64});
    const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(device);
    auto theta = torch::pow(base_, torch::arange(0, d, 2, f64) / static_cast<double>(-d));  // [d/2] base^(-2n/d)
    auto angles = torch::outer(torch::arange(n, f64), theta).repeat({1, 2});                // [N, d]: pair n twice
    cos_ = angles.cos().to(dtype);
    sin_ = angles.sin().to(dtype);
  }

  double base_;
  torch::Tensor cos_, sin_;  // [N, d] cos(p theta_n) and sin(p theta_n) at row p, columns n and n + d/2
};

struct Config {
  double base = 10000.0;
};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>().option(
      "base", &Config::base, "rotation frequencies base^(-2n/d), n = 0..d/2-1 (the paper's 10000)", {.min = 1.0});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  const std::string user = scorer_checks::user(sc);
  scorer_checks::require_self_attention(options, sc, "queries and keys rotated by their positions in one sequence");
  scorer_checks::require_equal_sizes(options, sc);
  ATTNLAB_CHECK(sc.query_size % 2 == 0, ConfigError,
                "{}: {} rotates pairs of features, so it needs an even per-head size, but {} gives it {} features "
                "per head (model width / num_heads = {} / {})",
                options.resolved().where(), options.owner(), user, sc.query_size, sc.query_size * sc.num_heads,
                sc.num_heads);
  const Config c = binding().read(options);
  return std::make_shared<Rope>(c.base);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "rope",
               "RoPE (Su et al. 2021): queries and keys rotated by their positions (half-split pairs, as GPT-NeoX "
               "and Llama), then scaled dot products; self-attention only",
               schema, make)
