#pragma once
// The fused GRU's per-step gate kernels (fused_gru_layer.cpp runs the GEMMs around them): one pass
// over [B, H] computes every gate and the new state, one pass their backward. PyTorch's GRU
// equations, in ATen's order of operations:
//   r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r ⊙ h_n),  h' = (h − n) ⊙ z + n
// with x_* = x W_ihᵀ + b_ih and h_* = h W_hhᵀ + b_hh, chunked r, z, n as torch's weights are.
// Row b of a matrix starts at ptr + b * ld (ld: its leading dimension); within a row the H (3H,
// 4H) values are contiguous.
#include <cstdint>

namespace attnlab::nn::fused_gru {

/// One forward step.
template <typename T>
struct GatesForward {
  int64_t batch = 0;      // B
  int64_t hidden = 0;     // H
  const T* gi = nullptr;  // [B, 3H] x W_ihᵀ + b_ih
  int64_t ld_gi = 0;
  const T* gh = nullptr;  // [B, 3H] h W_hhᵀ + b_hh, contiguous
  const T* h = nullptr;   // [B, H] previous state
  int64_t ld_h = 0;
  T* h_next = nullptr;  // [B, H] new state
  int64_t ld_h_next = 0;
  T* saved = nullptr;  // [B, 4H] r, z, n, h_n for the backward, contiguous; nullptr: not kept
};

/// One backward step.
template <typename T>
struct GatesBackward {
  int64_t batch = 0;
  int64_t hidden = 0;
  const T* dy = nullptr;  // [B, H] gradient of this step's output; nullptr: none
  int64_t ld_dy = 0;
  T* dh = nullptr;       // [B, H] contiguous; in: gradient of h' from later steps, out: dh' ⊙ z
  const T* h = nullptr;  // [B, H] previous state
  int64_t ld_h = 0;
  const T* saved = nullptr;  // [B, 4H] kept by the forward
  T* dgi = nullptr;          // [B, 3H] gradient of x W_ihᵀ + b_ih
  int64_t ld_dgi = 0;
  T* dgh = nullptr;  // [B, 3H] gradient of h W_hhᵀ + b_hh, contiguous
};

/// All B rows, split over threads (at::parallel_for) only when there is enough work: a tiny
/// [B, H] runs on the calling thread.
void gates_forward(const GatesForward<float>& step);
void gates_forward(const GatesForward<double>& step);
void gates_backward(const GatesBackward<float>& step);
void gates_backward(const GatesBackward<double>& step);

// Rows [begin, end), compiled once per CPU capability (fused_gru_gates_rows.hpp); gates_forward
// and gates_backward pick one at run time, as ATen's DispatchStub does.
namespace kernel_default {
void forward_rows(const GatesForward<float>& step, int64_t begin, int64_t end);
void forward_rows(const GatesForward<double>& step, int64_t begin, int64_t end);
void backward_rows(const GatesBackward<float>& step, int64_t begin, int64_t end);
void backward_rows(const GatesBackward<double>& step, int64_t begin, int64_t end);
}  // namespace kernel_default
namespace kernel_avx2 {
void forward_rows(const GatesForward<float>& step, int64_t begin, int64_t end);
void forward_rows(const GatesForward<double>& step, int64_t begin, int64_t end);
void backward_rows(const GatesBackward<float>& step, int64_t begin, int64_t end);
void backward_rows(const GatesBackward<double>& step, int64_t begin, int64_t end);
}  // namespace kernel_avx2

}  // namespace attnlab::nn::fused_gru
