#pragma once
// The attention core on the CPU as one autograd node: dropout(masked_softmax(q k^T * scale + bias,
// valid_lens)) @ v, with a hand-written backward. at::scaled_dot_product_attention takes its own
// fused CPU kernel only without dropout; with dropout (training) it falls back to its composition,
// about 25 ops forward and 10 autograd nodes. Here a training step runs two bmm forward and four
// backward, and one pass over the weights each way for the masking, softmax and dropout. Measured
// on a 2-core AMD EPYC, one thread, forward and backward of one call: 3.8x SDPA (either path) at
// Step-by-Step's corners sizes, 2.5-2.9x at d2l's and seed 000's, 1.5-1.6x at Multi30K's (with a
// bias that needs its gradient: 2.5-3.8x, 1.7-1.9x).
//
// Semantics are d2l's masked softmax: row (b, i) attends to its first valid_lens keys (the count
// of positions j < valid_len, so float lengths work too) and a row with none weighs all keys
// uniformly (d2l fills -1e6; its bias is dropped with its scores). Dropout draws its mask as the
// fused residual kernels do (attnlab/nn/fused.hpp): one draw of torch's default CPU generator per
// call keys a Philox stream indexed by element, whatever the thread count; not torch::dropout's.
#include <torch/types.h>

namespace attnlab::nn::fused {

/// Whether attention() takes these: CPU strided float or double queries [B, Q, D], keys [B, K, D]
/// and values [B, K, Dv] of one dtype, K >= 1, valid_lens undefined or a CPU [B] or [B, Q] tensor,
/// bias undefined or a CPU floating tensor that broadcasts to [B, Q, K], and no ComposedOnly on
/// this thread.
bool attention_supported(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                         const torch::Tensor& valid_lens, const torch::Tensor& bias = {});

/// dropout(masked_softmax(queries keys^T * scale + bias, valid_lens), p) @ values -> [B, Q, Dv].
/// bias (undefined: none) broadcasts to [B, Q, K] and gets its gradient. p is applied as given
/// (0 <= p < 1; the caller passes 0 outside training). `keep` (a test hook): set to the keep mask,
/// bool [B, Q, K], when one was drawn; undefined otherwise.
torch::Tensor attention(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                        const torch::Tensor& valid_lens, const torch::Tensor& bias, double p, double scale,
                        torch::Tensor* keep = nullptr);

/// While one is alive on this thread (and `on`), attention_supported() and linear_supported()
/// (nn/fused_linear.hpp) are false: the callers take the composition of torch ops instead. The
/// transformer blocks open one for `fused: false`.
class ComposedOnly {
 public:
  explicit ComposedOnly(bool on = true);
  ~ComposedOnly();
  ComposedOnly(const ComposedOnly&) = delete;
  ComposedOnly& operator=(const ComposedOnly&) = delete;

 private:
  bool previous_;
};

/// Whether a ComposedOnly is open on this thread.
bool composed_only();

}  // namespace attnlab::nn::fused
