#pragma once
// The attention chapter's other scorers (d2l 0.17, chapter 10): additive (Bahdanau), Gaussian
// kernel (Nadaraya-Watson) and average pooling. Each returns raw scores [B, Q, K] and ignores
// positions; masking, softmax, dropout and pooling are the framework's Attention
// (nn/attention.hpp), so every scorer works on its own (Attention) and per head inside
// MultiHeadAttention.
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace attnlab::nn {

/// d2l AdditiveAttention's scores: w_v^T tanh(W_q q + W_k k), no biases. Queries and keys may have
/// different sizes. Attention(AdditiveScorer(...), dropout) equals d2l's AdditiveAttention: d2l
/// softmaxes the masked scores and applies dropout to the weights, as Attention does.
class AdditiveScorerImpl : public Scorer {
 public:
  AdditiveScorerImpl(int64_t query_size, int64_t key_size, int64_t num_hiddens);
  /// queries [B, Q, Dq], keys [B, K, Dk] -> scores [B, Q, K]. Projects queries and keys first
  /// ([B, Q, H], [B, K, H]); only the tanh features [B, Q, K, H] are materialised, once.
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions& positions) override;

  torch::nn::Linear W_q{nullptr}, W_k{nullptr}, w_v{nullptr};
};
TORCH_MODULE(AdditiveScorer);

/// Nadaraya-Watson Gaussian kernel: score = -((q - k) w)^2 / 2, i.e. -w^2 |q - k|^2 / 2 for
/// vectors. learnable = false is the nonparametric estimator (w fixed, default 1); learnable =
/// true makes w one trainable parameter (d2l's NWKernelRegression).
class GaussianKernelScorerImpl : public Scorer {
 public:
  GaussianKernelScorerImpl(double w, bool learnable);
  /// queries [B, Q, D], keys [B, K, D] -> scores [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions& positions) override;
  /// Current w (a parameter when learnable, a buffer otherwise), shape [1].
  const torch::Tensor& w() const { return w_; }
  bool learnable() const { return learnable_; }

 private:
  torch::Tensor w_;  // [1]
  bool learnable_;
};
TORCH_MODULE(GaussianKernelScorer);

/// Average pooling, the "dumbest estimator": every score is 0, so the masked softmax gives
/// uniform weights over the valid keys.
class AverageScorerImpl : public Scorer {
 public:
  AverageScorerImpl() = default;
  /// queries [B, Q, Dq], keys [B, K, Dk] -> zeros [B, Q, K] (queries' dtype and device)
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions& positions) override;
};
TORCH_MODULE(AverageScorer);

}  // namespace attnlab::nn
