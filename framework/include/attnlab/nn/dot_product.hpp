#pragma once
// Scaled dot-product scorer (d2l DotProductAttention's scores): q @ k^T / sqrt(d), with a fused
// attend() through at::scaled_dot_product_attention that matches the explicit path exactly.
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/pimpl.h>

#include <optional>

namespace attnlab::nn {

class DotProductScorerImpl : public Scorer {
 public:
  DotProductScorerImpl() = default;
  /// queries [B, Q, D], keys [B, K, D] -> scores [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys) override;
  /// SDPA with a boolean mask from valid_lens. Rows whose valid length is 0 get uniform weights
  /// over all keys, as d2l's -1e6 masking gives. -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens, double dropout,
                                      bool training) override;
};
TORCH_MODULE(DotProductScorer);

/// Boolean mask of the positions kept by d2l masking: scores [B, Q, K]-shaped sizes, valid_lens
/// [B] or [B, Q] -> [B, Q, K] (true = attend). Undefined valid_lens is not allowed here.
torch::Tensor valid_mask(int64_t batch, int64_t queries, int64_t keys, const torch::Tensor& valid_lens);

}  // namespace attnlab::nn
