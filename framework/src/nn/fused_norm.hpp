#pragma once
// layer_norm(x) on the CPU as one autograd node, over the fused residual kernels' row loops
// (attnlab/nn/fused.hpp) without the residual: the norm-first blocks' norms and their stacks' final
// LayerNorm. torch::layer_norm runs native_layer_norm and its autograd node, with their allocations
// and views, each way; at the widths of the book's models that dispatch is most of its cost.
#include <torch/types.h>

namespace attnlab::nn::fused {

/// layer_norm(x) over the last dimension with weight and bias [H] -> [..., H]: one autograd node
/// when the fused kernels take the tensors (fused::supported) and no ComposedOnly is open on this
/// thread (nn/fused_attention.hpp); otherwise torch::layer_norm itself. The backward is not itself
/// differentiable (no double backward), as for the other fused nodes.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);

}  // namespace attnlab::nn::fused
