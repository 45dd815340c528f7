#pragma once
// d2l AdditiveAttention's scores (d2l 0.17, section 10.3), the "additive" plugin's scorer (used by
// this plugin alone; tests/ tests it). Raw scores [B, Q, K], positions ignored; masking, softmax,
// dropout and pooling are the framework's Attention (nn/attention.hpp), so it works on its own
// (Attention) and per head inside MultiHeadAttention.
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace attnlab::scorers::additive {

/// d2l AdditiveAttention's scores: w_v^T tanh(W_q q + W_k k), no biases. Queries and keys may have
/// different sizes. Attention(AdditiveScorer(...), dropout) equals d2l's AdditiveAttention: d2l
/// softmaxes the masked scores and applies dropout to the weights, as Attention does.
class AdditiveScorerImpl : public nn::Scorer {
 public:
  /// fused: on CPU in float or double, score in one pass without the [B, Q, K, H] tanh features
  /// (additive_kernels.hpp: one autograd node, tanh recomputed in its backward); false, or other
  /// devices and dtypes: the composition of torch ops, d2l's code.
  AdditiveScorerImpl(int64_t query_size, int64_t key_size, int64_t num_hiddens, bool fused = true);
  /// queries [B, Q, Dq], keys [B, K, Dk] -> scores [B, Q, K]. Projects queries and keys first
  /// ([B, Q, H], [B, K, H]), then w_v^T tanh(q + k) for every query-key pair.
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions& positions) override;

  torch::nn::Linear W_q{nullptr}, W_k{nullptr}, w_v{nullptr};
  bool fused = true;
};
TORCH_MODULE(AdditiveScorer);

}  // namespace attnlab::scorers::additive
