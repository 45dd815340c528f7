#pragma once
// The additive scores' CUDA kernels (additive_cuda.cu), for contiguous float or double tensors on
// one device, launched on `stream`. additive_kernels.cpp wraps them in the autograd node.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace attnlab::scorers::additive::cuda {

/// s [B, Q, K] = Σ_h w[h] tanh(q [B, Q, H] + k [B, K, H]).
template <class T>
void scores(const T* q, const T* k, const T* w, T* s, int64_t B, int64_t Q, int64_t K, int64_t H, cudaStream_t stream);

/// dq [B, Q, H], dk [B, K, H], and dw_partial [dw_partial_rows(B, Q), H], whose column sums are
/// dw (summed by the caller, in a fixed order: the result does not depend on scheduling), from
/// g = dL/ds [B, Q, K]. Every element of dq, dk and dw_partial is written.
template <class T>
void scores_backward(const T* q, const T* k, const T* w, const T* g, T* dq, T* dk, T* dw_partial, int64_t B, int64_t Q,
                     int64_t K, int64_t H, cudaStream_t stream);

/// Rows of scores_backward's dw_partial.
int64_t dw_partial_rows(int64_t B, int64_t Q);

}  // namespace attnlab::scorers::additive::cuda
