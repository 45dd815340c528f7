// The Nadaraya-Watson Gaussian-kernel scorer (d2l 0.17, section 10.2).
#include "gaussian_kernel_scorer.hpp"

#include <attnlab/nn/scorer_checks.hpp>

#include <torch/types.h>

namespace attnlab::scorers::gaussian_kernel {

GaussianKernelScorerImpl::GaussianKernelScorerImpl(double w, bool learnable) : learnable_(learnable) {
  auto value = torch::full({1}, w, torch::kFloat);  // [1]
  w_ = learnable ? register_parameter("w", value) : register_buffer("w", value);
}

torch::Tensor GaussianKernelScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                              const nn::Positions&) {
  nn::check_queries_and_keys("GaussianKernelScorer", queries, keys);
  TORCH_CHECK(queries.size(2) == keys.size(2), "GaussianKernelScorer: queries and keys need one size, found ",
              queries.sizes(), " and ", keys.sizes());
  if (queries.size(2) == 1) {
    // Scalars, as in the book: -((q - k) * w)^2 / 2 on the differences themselves.
    auto diff = queries - keys.transpose(1, 2);  // [B, Q, K]
    return -(diff * w_).pow(2) / 2;              // [B, Q, K]
  }
  // Vectors: |q - k|^2 = |q|^2 + |k|^2 - 2 q.k without materialising [B, Q, K, D].
  auto qq = queries.pow(2).sum(-1, /*keepdim=*/true);                                // [B, Q, 1]
  auto kk = keys.pow(2).sum(-1).unsqueeze(1);                                        // [B, 1, K]
  auto sq = (qq + kk - 2 * torch::bmm(queries, keys.transpose(1, 2))).clamp_min(0);  // [B, Q, K]
  return -w_.pow(2) * sq / 2;                                                        // [B, Q, K]
}

}  // namespace attnlab::scorers::gaussian_kernel
