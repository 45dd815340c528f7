#pragma once
// The Nadaraya-Watson Gaussian kernel's scores (d2l 0.17, section 10.2), the "gaussian_kernel"
// plugin's scorer (used by this plugin alone; tests/ tests it). Raw scores [B, Q, K], positions
// ignored; masking, softmax and pooling are the framework's Attention (nn/attention.hpp).
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/pimpl.h>

namespace attnlab::scorers::gaussian_kernel {

/// Nadaraya-Watson Gaussian kernel: score = -((q - k) w)^2 / 2, i.e. -w^2 |q - k|^2 / 2 for
/// vectors. learnable = false is the nonparametric estimator (w fixed, default 1); learnable =
/// true makes w one trainable parameter (d2l's NWKernelRegression).
class GaussianKernelScorerImpl : public nn::Scorer {
 public:
  GaussianKernelScorerImpl(double w, bool learnable);
  /// queries [B, Q, D], keys [B, K, D] -> scores [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions& positions) override;
  /// Current w (a parameter when learnable, a buffer otherwise), shape [1].
  const torch::Tensor& w() const { return w_; }
  bool learnable() const { return learnable_; }

 private:
  torch::Tensor w_;  // [1]
  bool learnable_;
};
TORCH_MODULE(GaussianKernelScorer);

}  // namespace attnlab::scorers::gaussian_kernel
