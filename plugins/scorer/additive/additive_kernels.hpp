#pragma once
// Additive scores without the [B, Q, K, H] tanh features: s[b, q, k] = Σ_h w[h] tanh(q[b, q, h] +
// k[b, k, h]) in one pass over the projected queries and keys, and its gradients in one more,
// recomputing each tanh instead of storing them. The row loops (additive_kernels_rows.hpp) are
// compiled twice, for the build's baseline ISA (additive_kernels.cpp) and for AVX2 + FMA
// (additive_kernels_avx2.cpp: Sleef's tanh, 8 floats a vector), as ATen builds its own kernels;
// additive_kernels.cpp picks one at run time and splits the work over ATen's threads.
#include <torch/types.h>

#include <cstdint>

namespace attnlab::scorers::additive {

/// w_v^T tanh(q + k) as one autograd node: q [B, Q, H], k [B, K, H], w [1, H] or [H] (w_v's weight)
/// -> [B, Q, K]. CPU or CUDA (fused_scores_supported). Its backward is
/// first-order only: it does not build a graph of its own (no double backward).
torch::Tensor fused_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w);

/// Whether fused_scores takes these tensors: float or double on the CPU, and on a GPU (when built
/// with CUDA, cuda_built()) also bf16 or half projections, scored in float.
bool fused_scores_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w);

/// Bahdanau's attention in one autograd node on the CPU: fused_scores, d2l's masked softmax (-1e6
/// where key k >= the row's valid length; valid_lens [B], [B, Q] or undefined), the dropout noise
/// (undefined, or at::dropout's [B, Q, K] mask: bernoulli(1 - p) / (1 - p)) and the pooling of
/// `values` [B, K, Dv] -> [B, Q, Dv]. What Attention computes from score() (masked_softmax,
/// dropout, bmm), without the scores, weights and their nodes in between. First-order backward.
torch::Tensor fused_attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                           const torch::Tensor& values, const torch::Tensor& valid_lens, const torch::Tensor& noise);
/// Whether fused_attend takes these: fused_scores' float or double on the CPU, values of the same
/// dtype, nothing empty, and integer or float lengths of one of those shapes.
bool fused_attend_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                            const torch::Tensor& values, const torch::Tensor& valid_lens);
/// The part of that which does not need the projections: B, Q, K rows of `dtype` scores.
bool fused_attend_takes(int64_t B, int64_t Q, int64_t K, at::ScalarType dtype, const torch::Tensor& values,
                        const torch::Tensor& valid_lens);
/// Whether this build has the CUDA kernels (additive_cuda.cu: nvcc was found at configure time).
bool cuda_built();

namespace kernels {

/// One call's operands, contiguous. Forward: rows r = b * Q + q of scores [B * Q, K]. Backward: the
/// batch rows b, each writing dq [b], dk [b] and its own partial dw [b] (summed over b in order
/// afterwards, so the result does not depend on how the rows were split).
template <class T>
struct Operands {
  const T* q = nullptr;  // [B, Q, H]
  const T* k = nullptr;  // [B, K, H]
  const T* w = nullptr;  // [H]
  int64_t Q = 0, K = 0, H = 0;
};

#define ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS(T)                               \
  void forward_rows(const Operands<T>& a, T* scores, int64_t r0, int64_t r1); \
  void backward_batches(const Operands<T>& a, const T* dscores, T* dq, T* dk, T* dw_partial, int64_t b0, int64_t b1);

namespace baseline {
ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS(float)
ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS(double)
}  // namespace baseline
namespace avx2 {  // defined when built with ATTNLAB_ADDITIVE_AVX2 (x86-64)
ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS(float)
ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS(double)
}  // namespace avx2
#undef ATTNLAB_ADDITIVE_KERNEL_DECLARATIONS

/// Which copy fused_scores runs: AVX2 where ATen runs AVX2 or better itself, else the baseline.
/// Tests set it to compare both copies on one machine.
enum class Isa { Auto, Baseline, Avx2 };
void set_isa(Isa isa);
/// Whether the AVX2 copy was built and this CPU runs it.
bool avx2_available();

}  // namespace kernels
}  // namespace attnlab::scorers::additive
