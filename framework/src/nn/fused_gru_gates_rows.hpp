// The gate kernels' row loops, included once per CPU capability: by fused_gru_gates.cpp (ATen's
// DEFAULT Vectorized, the build's baseline ISA) with ATTNLAB_GRU_KERNEL_NS kernel_default, and by
// fused_gru_gates_avx2.cpp (compiled -mavx2 -mfma with CPU_CAPABILITY_AVX2: 8 floats a vector,
// Sleef's exp and tanh, as ATen's own AVX2 kernels) with kernel_avx2. Nothing but at::vec here, so
// the AVX2 object holds no other inline code that could be picked for the whole library.
#ifndef ATTNLAB_GRU_KERNEL_NS
#error "define ATTNLAB_GRU_KERNEL_NS (kernel_default or kernel_avx2) before including this file"
#endif

#include "nn/fused_gru_gates.hpp"

#include <ATen/cpu/vec/vec.h>

#include <algorithm>

namespace attnlab::nn::fused_gru::ATTNLAB_GRU_KERNEL_NS {
namespace {

using at::vec::Vectorized;

/// As ATen's sigmoid kernel: 1 / (1 + exp(0 - a)).
template <typename T>
inline Vectorized<T> sigmoid(const Vectorized<T>& a) {
  return (Vectorized<T>(T(1)) + (Vectorized<T>(T(0)) - a).exp()).reciprocal();
}

template <typename T>
void forward_rows_impl(const GatesForward<T>& s, int64_t begin, int64_t end) {
  using Vec = Vectorized<T>;
  const int64_t H = s.hidden;
  for (int64_t b = begin; b < end; ++b) {
    const T* gi = s.gi + b * s.ld_gi;  // [3H] r, z, n
    const T* gh = s.gh + b * 3 * H;    // [3H]
    const T* h = s.h + b * s.ld_h;     // [H]
    T* out = s.h_next + b * s.ld_h_next;
    T* saved = s.saved != nullptr ? s.saved + b * 4 * H : nullptr;  // [4H] r, z, n, h_n
    for (int64_t j = 0; j < H; j += Vec::size()) {
      const int64_t m = std::min<int64_t>(Vec::size(), H - j);
      const Vec r = sigmoid(Vec::loadu(gh + j, m) + Vec::loadu(gi + j, m));
      const Vec z = sigmoid(Vec::loadu(gh + H + j, m) + Vec::loadu(gi + H + j, m));
      const Vec hn = Vec::loadu(gh + 2 * H + j, m);
      const Vec n = (Vec::loadu(gi + 2 * H + j, m) + hn * r).tanh();
      const Vec next = (Vec::loadu(h + j, m) - n) * z + n;
      next.store(out + j, m);
      if (saved != nullptr) {
        r.store(saved + j, m);
        z.store(saved + H + j, m);
        n.store(saved + 2 * H + j, m);
        hn.store(saved + 3 * H + j, m);
      }
    }
  }
}

// With dh the whole gradient of h' (this step's output and the later steps'):
//   dn = dh ⊙ (1 − z) ⊙ (1 − n²)        -> x_n;  r ⊙ dn -> h_n
//   dz = dh ⊙ (h − n) ⊙ z ⊙ (1 − z)     -> x_z and h_z
//   dr = dn ⊙ h_n ⊙ r ⊙ (1 − r)         -> x_r and h_r
// and dh ⊙ z flows straight to h (the GEMM with W_hh adds the rest).
template <typename T>
void backward_rows_impl(const GatesBackward<T>& s, int64_t begin, int64_t end) {
  using Vec = Vectorized<T>;
  const int64_t H = s.hidden;
  const Vec one(T(1));
  for (int64_t b = begin; b < end; ++b) {
    const T* dy = s.dy != nullptr ? s.dy + b * s.ld_dy : nullptr;  // [H]
    T* dh_row = s.dh + b * H;                                      // [H] in and out
    const T* h = s.h + b * s.ld_h;                                 // [H]
    const T* saved = s.saved + b * 4 * H;                          // [4H] r, z, n, h_n
    T* dgi = s.dgi + b * s.ld_dgi;                                 // [3H]
    T* dgh = s.dgh + b * 3 * H;                                    // [3H]
    for (int64_t j = 0; j < H; j += Vec::size()) {
      const int64_t m = std::min<int64_t>(Vec::size(), H - j);
      Vec dh = Vec::loadu(dh_row + j, m);
      if (dy != nullptr) dh = dh + Vec::loadu(dy + j, m);
      const Vec r = Vec::loadu(saved + j, m);
      const Vec z = Vec::loadu(saved + H + j, m);
      const Vec n = Vec::loadu(saved + 2 * H + j, m);
      const Vec hn = Vec::loadu(saved + 3 * H + j, m);
      const Vec dn = dh * (one - z) * (one - n * n);
      const Vec dz = dh * (Vec::loadu(h + j, m) - n) * z * (one - z);
      const Vec dr = dn * hn * r * (one - r);
      dr.store(dgi + j, m);
      dz.store(dgi + H + j, m);
      dn.store(dgi + 2 * H + j, m);
      dr.store(dgh + j, m);
      dz.store(dgh + H + j, m);
      (dn * r).store(dgh + 2 * H + j, m);
      (dh * z).store(dh_row + j, m);
    }
  }
}

}  // namespace

void forward_rows(const GatesForward<float>& s, int64_t begin, int64_t end) { forward_rows_impl(s, begin, end); }
void forward_rows(const GatesForward<double>& s, int64_t begin, int64_t end) { forward_rows_impl(s, begin, end); }
void backward_rows(const GatesBackward<float>& s, int64_t begin, int64_t end) { backward_rows_impl(s, begin, end); }
void backward_rows(const GatesBackward<double>& s, int64_t begin, int64_t end) { backward_rows_impl(s, begin, end); }

}  // namespace attnlab::nn::fused_gru::ATTNLAB_GRU_KERNEL_NS
