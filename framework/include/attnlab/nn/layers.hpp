#pragma once
// Transformer building blocks shared by plugins (d2l 1.0.3): positional encoding, FFN, add & norm,
// and the RMSNorm and SwiGLU FFN of Llama-style stacks.
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace attnlab::nn {

/// What a transformer adds to its token embeddings to say where each token stands.
enum class AbsolutePositions {
  Sinusoidal,  // Vaswani et al.'s fixed encoding (d2l's): the buffer P
  Learned,     // a trained table, one row per position (BERT, GPT-2), initialised normal(0, 0.02)
  None,        // nothing added: positions come from the scorer (RoPE, ALiBi, T5, Shaw) or not at all (NoPE)
  Auto,        // transformer options only: None when the module's self-attention scorer encodes positions
               // (Scorer::encodes_positions), Sinusoidal otherwise; a PositionalEncoding takes it as Sinusoidal
};

/// Positional encoding with dropout: X + P[:, offset:offset + T, :], then dropout, where P is the
/// sinusoidal table (Sinusoidal) or a learned one (Learned, the parameter `table`); None adds nothing.
class PositionalEncodingImpl : public torch::nn::Module {
 public:
  /// The sinusoidal P is a buffer whatever `kind` is (the module's state keeps its keys); Learned
  /// adds the parameter `table` [max_len, num_hiddens], normal(0, 0.02).
  PositionalEncodingImpl(int64_t num_hiddens, double dropout, int64_t max_len = 1000,
                         AbsolutePositions kind = AbsolutePositions::Sinusoidal);
  /// x [B, T, H] -> [B, T, H]. `offset`: position of x's first step (incremental decoding feeds
  /// step t alone and needs P[:, t]; d2l 1.0.3 always adds P[:, :T]).
  torch::Tensor forward(const torch::Tensor& x, int64_t offset = 0);
  /// Sinusoidal, Learned or None (what forward adds).
  AbsolutePositions kind() const { return kind_; }
  /// Stops adding the sinusoidal P (a transformer whose scorer encodes positions, under Auto).
  /// Only from Sinusoidal: a learned table would be left untrained.
  void switch_off();
  torch::Tensor P;      // [1, max_len, H] buffer
  torch::Tensor table;  // [max_len, H] parameter (Learned), undefined otherwise
 private:
  torch::nn::Dropout dropout_{nullptr};
  AbsolutePositions kind_ = AbsolutePositions::Sinusoidal;
};
TORCH_MODULE(PositionalEncoding);

/// The position-wise FFN's nonlinearity: ReLU (d2l, Vaswani et al.), GELU (BERT; exact, with erf),
/// GELU's tanh approximation (GPT-2's "gelu_new", Hugging Face's gelu_pytorch_tanh), or SwiGLU
/// (Shazeer 2020, Llama's MLP): a third layer, the gate, and silu(gate(x)) * dense1(x) in place of
/// act(dense1(x)).
enum class Activation { ReLU, GELU, GELUTanh, SwiGLU };

/// Position-wise FFN: dense2(act(dense1(x))), act ReLU unless asked otherwise; optional dropout
/// after the activation (Step-by-Step's layers). SwiGLU: dense2(silu(gate(x)) * dense1(x)), Llama's
/// down(silu(gate(x)) * up(x)).
/// `conv1d`: the two layers are kernel-size-1 Conv1d over time instead (TF lab's Conv1D FFN) — the
/// same function, with weights [out, in, 1] where Linear has [out, in]; not with SwiGLU.
/// `bias`: the linear layers' biases (Llama's have none).
class PositionWiseFFNImpl : public torch::nn::Module {
 public:
  PositionWiseFFNImpl(int64_t in_size, int64_t ffn_hiddens, int64_t out_size, double inner_dropout = 0.0,
                      bool conv1d = false, Activation activation = Activation::ReLU, bool bias = true);
  /// x [B, T, in] -> [B, T, out]
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear dense1{nullptr}, dense2{nullptr};  // linear layout (null when conv1d)
  torch::nn::Linear gate{nullptr};                     // SwiGLU only: in -> ffn_hiddens
  torch::nn::Conv1d conv1{nullptr}, conv2{nullptr};    // conv1d layout (null otherwise)
 private:
  torch::Tensor activate(const torch::Tensor& h) const;
  torch::nn::Dropout dropout_{nullptr};
  Activation activation_ = Activation::ReLU;
};
TORCH_MODULE(PositionWiseFFN);

/// Which normalisation the transformer stacks use: LayerNorm (weight and bias, mean removed) or
/// RMSNorm (Zhang & Sennrich 2019, Llama's: weight only, x / rms(x)).
enum class NormType { Layer, RMS };

/// RMSNorm as Hugging Face's Llama computes it: x * rsqrt(mean(x^2) + eps) in float32 (double stays
/// double), cast back to x's dtype, times `weight` (ones at first). Its one parameter is "weight".
class RMSNormImpl : public torch::nn::Cloneable<RMSNormImpl> {
 public:
  explicit RMSNormImpl(int64_t num_hiddens, double eps = 1e-6);
  void reset() override;
  /// x [..., H] -> [..., H]
  torch::Tensor forward(const torch::Tensor& x);
  int64_t num_hiddens;
  double eps;
  torch::Tensor weight;  // [H]
};
TORCH_MODULE(RMSNorm);

/// Residual connection with layer norm, either norm-last (d2l AddNorm: ln(x + dropout(y)))
/// or norm-first (x + dropout(y) where y was computed from ln(x): use `pre()` then `post()`).
enum class NormPlacement { First, Last };

class AddNormImpl : public torch::nn::Module {
 public:
  /// `fused`: post() in training is one CPU kernel (nn/fused.hpp) with its own dropout stream;
  /// false: the reference composition of torch ops (torch's dropout). The same parameters either way.
  /// `type` RMS: an RMSNorm instead of the LayerNorm (the fused kernels normalise with LayerNorm, so
  /// its norm is the composition of torch ops; norm-first's residual add stays fused).
  AddNormImpl(int64_t num_hiddens, double dropout, NormPlacement placement, double eps = 1e-5, bool fused = true,
              NormType type = NormType::Layer);
  /// What the sublayer should see: ln(x) for norm-first, x for norm-last. [B, T, H]
  torch::Tensor pre(const torch::Tensor& x);
  /// Combine input x and sublayer output y. [B, T, H]
  torch::Tensor post(const torch::Tensor& x, const torch::Tensor& y);
  /// ln or rms on x [B, T, H], fused (LayerNorm) unless `fused` is false.
  torch::Tensor norm(const torch::Tensor& x);
  torch::nn::LayerNorm ln{nullptr};  // NormType::Layer
  RMSNorm rms{nullptr};              // NormType::RMS, registered as "ln" too: one name for the block's norm
  NormPlacement placement;
  bool fused;

 private:
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(AddNorm);

}  // namespace attnlab::nn
