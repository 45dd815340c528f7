#pragma once
// The built-in blocks' linear layers on the CPU as one autograd node: y = x weight^T + bias.
// torch::linear on a [B, T, in] input runs about eight ops forward (reshape, t, addmm, view) and
// four autograd nodes whose backward runs about twelve more (t, mm, sum, views). At the sizes of
// Step-by-Step's corners (48 rows, 6 or 10 features) that dispatch is the whole cost, about 36 us
// for forward and backward of one layer on one thread of a 2-core AMD EPYC; here the products run
// as plain loops, about 17 us. Above kLoopMacs multiply-adds the products are BLAS GEMMs on the raw
// buffers (nn/blas.hpp: one forward, two backward, the heads' layouts copied around them), still
// one node and no ATen op inside.
//
// The backward under create_graph (a double backward) runs torch's differentiable ops instead, so
// higher derivatives stay right. What linear() does not take (see linear_supported) is
// torch::linear; so is everything inside a ComposedOnly scope (`fused: false`) and under autocast.
#include <torch/types.h>

namespace attnlab::nn::fused {

/// The largest rows x in x out that run as plain loops; larger products go to BLAS.
constexpr int64_t kLoopMacs = 16384;

/// Whether linear() runs these as its own node: a CPU strided float or double x [..., in] with
/// at least one dimension, weight [out, in] and bias undefined or [out] of x's dtype, no autocast
/// on the CPU, and no ComposedOnly (nn/fused_attention.hpp) on this thread.
bool linear_supported(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// x weight^T + bias -> [..., out], torch::linear's result. One autograd node when
/// linear_supported(), else torch::linear itself.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// linear(x, weight, bias) split into heads as one node: x [B, T, in] -> [B, heads, T, out / heads]
/// contiguous, or [B * heads, T, out / heads] with `fold` (nn::transpose_qkv of the linear layer).
torch::Tensor linear_split_heads(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 int64_t heads, bool fold);

/// The heads merged into a linear layer as one node: x [B * heads, T, d] -> [B, T, out], that is
/// linear(nn::transpose_output(x, heads), weight, bias) with weight [out, heads * d].
torch::Tensor linear_merge_heads(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 int64_t heads);

}  // namespace attnlab::nn::fused
