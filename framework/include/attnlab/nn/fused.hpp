#pragma once
// Fused CPU kernels for the transformer's residual connection: x + dropout(y), and
// layer_norm(x + dropout(y)), each one pass over the rows forward and one backward, with a
// hand-written backward (a custom autograd function). On tensors the kernels do not take (not
// CPU, not float/double, shapes that differ, no affine weights) and in eval they are the
// composition of torch ops, so a caller needs no second path.
//
// Dropout: its keep mask comes from one 64-bit draw of torch's default CPU generator per call
// (under its mutex) as the key of a Philox 4x32 stream indexed by element, so it depends on the
// generator's state alone: not on the thread count, and a checkpointed generator resumes the same
// masks. The stream is not torch::dropout's: the same seed gives other masks than the composition.
#include <torch/types.h>

namespace attnlab::nn::fused {

/// Whether the fused kernels take these tensors: CPU, float or double, x and y of one shape with
/// a last dimension H >= 1, weight and bias (when given) [H] of the same dtype.
bool supported(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight = {},
               const torch::Tensor& bias = {});

/// layer_norm(x + dropout(y)) over the last dimension, with weight and bias [H] (d2l's norm-last
/// AddNorm). x, y [..., H] -> [..., H]. Dropout only when `training`; p == 1 drops every element
/// (as torch::dropout). `keep` (a test hook): set to the keep mask, bool [..., H], when a mask was
/// drawn (training, 0 < p < 1, fused) or all false (p == 1); undefined otherwise.
torch::Tensor add_dropout_layer_norm(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                     const torch::Tensor& bias, double p, bool training, double eps,
                                     torch::Tensor* keep = nullptr);

/// x + dropout(y) (the norm-first residual). x, y [..., H] -> [..., H]; `keep` as above.
torch::Tensor add_dropout(const torch::Tensor& x, const torch::Tensor& y, double p, bool training,
                          torch::Tensor* keep = nullptr);

}  // namespace attnlab::nn::fused
