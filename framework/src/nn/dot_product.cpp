// Scaled dot-product scores and the fused SDPA path.
#include <attnlab/nn/dot_product.hpp>

#include <cmath>

namespace attnlab::nn {

torch::Tensor DotProductScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && queries.size(-1) == keys.size(-1),
              "DotProductScorer: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ",
              keys.sizes());
  const double d = static_cast<double>(queries.size(-1));
  return torch::bmm(queries, keys.transpose(1, 2)) / std::sqrt(d);  // [B, Q, K]
}

std::optional<torch::Tensor> DotProductScorerImpl::attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                                          const torch::Tensor& values,
                                                          const torch::Tensor& valid_lens, double dropout,
                                                          bool training) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && queries.size(-1) == keys.size(-1),
              "DotProductScorer: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ",
              keys.sizes());
  const double p = training ? dropout : 0.0;
  if (!valid_lens.defined()) return at::scaled_dot_product_attention(queries, keys, values, std::nullopt, p);
  auto keep = valid_mask(queries.size(0), queries.size(1), keys.size(1), valid_lens);  // [B, Q, K]
  // d2l gives a row with nothing valid -1e6 everywhere, i.e. uniform weights over all keys. SDPA
  // would give NaN for it, so such rows attend to everything with a zero query (all scores 0).
  auto empty = keep.any(-1, /*keepdim=*/true).logical_not();  // [B, Q, 1]
  auto q = queries.masked_fill(empty, 0.0);                   // [B, Q, D]
  keep = keep.logical_or(empty);                              // [B, Q, K]
  return at::scaled_dot_product_attention(q, keys, values, keep, p);  // [B, Q, Dv]
}

}  // namespace attnlab::nn
