// Scaled dot-product scores and the fused SDPA path.
#include <attnlab/nn/dot_product.hpp>

#include "nn/fused_attention.hpp"
#include "nn/mask_memo.hpp"

#include <cmath>
#include <limits>

namespace attnlab::nn {
namespace {

void check_qk(const torch::Tensor& queries, const torch::Tensor& keys) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && queries.size(-1) == keys.size(-1),
              "DotProductScorer: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ",
              keys.sizes());
}

}  // namespace

torch::Tensor DotProductScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions&) {
  check_qk(queries, keys);
  const double d = static_cast<double>(queries.size(-1));
  return torch::bmm(queries, keys.transpose(1, 2)) / std::sqrt(d);  // [B, Q, K]
}

std::optional<torch::Tensor> DotProductScorerImpl::attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                                          const torch::Tensor& values, const torch::Tensor& valid_lens,
                                                          const Positions&, double dropout, bool training) {
  check_qk(queries, keys);
  return scaled_dot_product_attend(queries, keys, values, valid_lens, {}, training ? dropout : 0.0);
}

torch::Tensor scaled_dot_product_attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const torch::Tensor& values, const torch::Tensor& valid_lens,
                                        const torch::Tensor& bias, double dropout, std::optional<double> scale) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && values.dim() == 3 && queries.size(-1) == keys.size(-1),
              "scaled_dot_product_attend: expected queries [B, Q, D], keys [B, K, D], values [B, K, Dv], found ",
              queries.sizes(), ", ", keys.sizes(), ", ", values.sizes());
  const int64_t batch = queries.size(0), q_len = queries.size(1), k_len = keys.size(1);
  // On the CPU the fused core (nn/fused_attention.hpp) is one autograd node where SDPA runs its
  // composition (with dropout or a bias), and faster than SDPA's own CPU kernel on these models'
  // shapes (without): 2.5-3.8x forward and backward at d2l's and Step-by-Step's, 1.6x at Multi30K's.
  if (dropout < 1.0 && fused::attention_supported(queries, keys, values, valid_lens, bias)) {
    const double d = static_cast<double>(queries.size(-1));
    return fused::attention(queries, keys, values, valid_lens, bias, dropout, scale.value_or(1.0 / std::sqrt(d)));
  }
  if (!valid_lens.defined()) {
    auto mask = bias.defined() ? std::optional<torch::Tensor>(bias.to(queries.scalar_type())) : std::nullopt;
    return at::scaled_dot_product_attention(queries, keys, values, mask, dropout, false, scale);  // [B, Q, Dv]
  }
  // d2l gives a row with nothing valid -1e6 everywhere, i.e. uniform weights over all keys. SDPA
  // would give NaN for it, so such rows attend to everything with a zero query (all scores 0)
  // and no bias. Both masks once per lengths tensor and shape in a step (nn/mask_memo.hpp).
  const auto masks = memo::derived(valid_lens, {memo::kSdpaMasks, batch, q_len, k_len}, [&] {
    const auto valid = valid_mask(batch, q_len, k_len, valid_lens);    // [B, Q, K]
    const auto empty = valid.any(-1, /*keepdim=*/true).logical_not();  // [B, Q, 1]
    return std::vector<torch::Tensor>{empty, valid.logical_or(empty)};
  });
  const auto& empty = masks[0];              // [B, Q, 1]
  const auto& keep = masks[1];               // [B, Q, K]
  auto q = queries.masked_fill(empty, 0.0);  // [B, Q, D]
  if (!bias.defined()) return at::scaled_dot_product_attention(q, keys, values, keep, dropout, false, scale);
  // Masked positions get -inf added (weight exactly 0, as the explicit path's -1e6 gives).
  auto mask = bias.to(queries.scalar_type())
                  .expand({batch, q_len, k_len})
                  .masked_fill(empty, 0.0)
                  .masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());  // [B, Q, K]
  return at::scaled_dot_product_attention(q, keys, values, mask, dropout, false, scale);       // [B, Q, Dv]
}

}  // namespace attnlab::nn
