#pragma once
// d2l AdditiveAttention's scores (d2l 0.17, section 10.3), the "additive" plugin's scorer (used by
// this plugin alone; tests/ tests it). Raw scores [B, Q, K], positions ignored; masking, softmax,
// dropout and pooling are the framework's Attention (nn/attention.hpp), so it works on its own
// (Attention) and per head inside MultiHeadAttention.
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>

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
  /// fused, on the CPU in float or double, dropout below 1: the projections, then scores, masked
  /// softmax, dropout and pooling as one node (additive_kernels.hpp: fused_attend), with the same
  /// dropout mask at::dropout would draw. Otherwise nullopt: Attention composes score() and its own.
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override;

  torch::nn::Linear W_q{nullptr}, W_k{nullptr}, w_v{nullptr};
  bool fused = true;

 private:
  /// W_k keys, reused while the same CPU keys come again: Bahdanau's decoder scores the same
  /// encoder states at every target step. The memo holds neither tensor: the projection is reused
  /// only while something else (the step's graph, which saves it) keeps it alive, so never after
  /// the backward that freed that graph, and never after keys or W_k change (version counters).
  torch::Tensor project_keys(const torch::Tensor& keys);
  using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  std::optional<WeakImpl> memo_keys_, memo_k_;
  const c10::TensorImpl* memo_weight_ = nullptr;
  const void* memo_weight_data_ = nullptr;
  uint32_t memo_keys_version_ = 0, memo_weight_version_ = 0;
  bool memo_grad_ = false;
};
TORCH_MODULE(AdditiveScorer);

}  // namespace attnlab::scorers::additive
