#pragma once
// Scaled dot-product scorer (d2l DotProductAttention's scores): q @ k^T / sqrt(d), with a fused
// attend() through at::scaled_dot_product_attention that matches the explicit path exactly.
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/pimpl.h>

#include <optional>

namespace attnlab::nn {

/// final: a subclass adding a bias to score() would lose it on the fused attend() path. A scorer
/// that is a dot product plus a bias implements both with scaled_dot_product_attend (as alibi does).
class DotProductScorerImpl final : public Scorer {
 public:
  DotProductScorerImpl() = default;
  /// queries [B, Q, D], keys [B, K, D] -> scores [B, Q, K] (positions unused)
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions& positions) override;
  /// SDPA with a boolean mask from valid_lens (scaled_dot_product_attend without a bias). -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const Positions& positions, double dropout, bool training) override;
};
TORCH_MODULE(DotProductScorer);

/// Boolean mask of the positions kept by d2l masking: scores [B, Q, K]-shaped sizes, valid_lens
/// [B] or [B, Q] -> [B, Q, K] (true = attend). Undefined valid_lens is not allowed here.
torch::Tensor valid_mask(int64_t batch, int64_t queries, int64_t keys, const torch::Tensor& valid_lens);

/// Fused attention (at::scaled_dot_product_attention) equal to the explicit path
/// dropout(masked_softmax(q k^T * scale + bias, valid_lens)) @ v:
/// queries [B, Q, D], keys [B, K, D], values [B, K, Dv], valid_lens [B] / [B, Q] / undefined,
/// bias [B, Q, K] (or broadcastable to it) / undefined, dropout the probability to apply (0 when
/// not training), scale nullopt = 1 / sqrt(D) -> [B, Q, Dv].
/// Rows whose valid length is 0 get uniform weights over all keys, as d2l's -1e6 masking gives
/// (their bias is dropped too, since -1e6 replaces every score of such a row).
torch::Tensor scaled_dot_product_attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const torch::Tensor& values, const torch::Tensor& valid_lens,
                                        const torch::Tensor& bias, double dropout,
                                        std::optional<double> scale = std::nullopt);

}  // namespace attnlab::nn
