// The additive kernels' row loops (additive_kernels.hpp), included once per ISA with
// ATTNLAB_ADDITIVE_ISA naming its namespace: baseline (additive_kernels.cpp, ATen's DEFAULT
// Vectorized) and avx2 (additive_kernels_avx2.cpp, compiled -mavx2 -mfma with CPU_CAPABILITY_AVX2).
// Nothing but at::vec here, so the AVX2 object holds no inline code the rest could pick up.
#ifndef ATTNLAB_ADDITIVE_ISA
#error "define ATTNLAB_ADDITIVE_ISA (baseline or avx2) before including this file"
#endif

#include "additive_kernels.hpp"

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>

namespace attnlab::scorers::additive::kernels::ATTNLAB_ADDITIVE_ISA {
namespace {

template <class T>
using Vec = at::vec::Vectorized<T>;

/// tanh(x) = 1 - 2 / (exp(2x) + 1) with ATen's fast exp (exp_u20: a polynomial, within 20 ULP;
/// it saturates to ±1 where exp overflows or underflows) and NaN kept. Sleef's tanh, which
/// Vectorized::tanh() calls, costs about ten times what MKL's takes in ATen's own tanh kernel (perf,
/// the d2l 0.17 Bahdanau run), and the backward evaluates it once more.
template <class T>
Vec<T> tanh_fast(const Vec<T>& x) {
  const Vec<T> one(T(1)), two(T(2));
  const Vec<T> t = one - two / ((x * two).exp_u20() + one);
  return Vec<T>::blendv(t, x, x.isnan());
}

template <class T>
void forward_impl(const Operands<T>& a, T* scores, int64_t r0, int64_t r1) {
  const int64_t H = a.H;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.Q;
    const T* q = a.q + r * H;
    T* s = scores + r * a.K;
    for (int64_t j = 0; j < a.K; ++j) {
      const T* k = a.k + (b * a.K + j) * H;
      Vec<T> acc(T(0));
      for (int64_t h = 0; h < H; h += Vec<T>::size()) {
        const int64_t m = std::min<int64_t>(Vec<T>::size(), H - h);  // lanes past m load 0: tanh(0) w = 0
        acc = at::vec::fmadd(tanh_fast(Vec<T>::loadu(q + h, m) + Vec<T>::loadu(k + h, m)), Vec<T>::loadu(a.w + h, m),
                             acc);
      }
      s[j] = at::vec::vec_reduce_all<T>([](Vec<T>& x, Vec<T>& y) { return x + y; }, acc);
    }
  }
}

// With t = tanh(q + k) and g = ds[b, q, k]: dw += g t; dq[b, q] and dk[b, k] += g w (1 - t²).
// A zero g (a masked or empty key: the masked softmax passes no gradient there) is skipped.
template <class T>
void backward_impl(const Operands<T>& a, const T* dscores, T* dq, T* dk, T* dw_partial, int64_t b0, int64_t b1) {
  const int64_t H = a.H;
  const Vec<T> one(T(1));
  for (int64_t b = b0; b < b1; ++b) {
    T* dw = dw_partial + b * H;
    for (int64_t i = 0; i < a.Q; ++i) {
      const int64_t r = b * a.Q + i;
      const T* q = a.q + r * H;
      T* dqr = dq + r * H;
      const T* ds = dscores + r * a.K;
      for (int64_t j = 0; j < a.K; ++j) {
        if (ds[j] == T(0)) continue;
        const Vec<T> g(ds[j]);
        const T* k = a.k + (b * a.K + j) * H;
        T* dkr = dk + (b * a.K + j) * H;
        for (int64_t h = 0; h < H; h += Vec<T>::size()) {
          const int64_t m = std::min<int64_t>(Vec<T>::size(), H - h);
          const Vec<T> t = tanh_fast(Vec<T>::loadu(q + h, m) + Vec<T>::loadu(k + h, m));
          at::vec::fmadd(g, t, Vec<T>::loadu(dw + h, m)).store(dw + h, m);
          const Vec<T> d = g * Vec<T>::loadu(a.w + h, m) * (one - t * t);
          (Vec<T>::loadu(dqr + h, m) + d).store(dqr + h, m);
          (Vec<T>::loadu(dkr + h, m) + d).store(dkr + h, m);
        }
      }
    }
  }
}

}  // namespace

#define ATTNLAB_ADDITIVE_KERNEL_DEFINITIONS(T)                                                                         \
  void forward_rows(const Operands<T>& a, T* scores, int64_t r0, int64_t r1) { forward_impl(a, scores, r0, r1); }      \
  void backward_batches(const Operands<T>& a, const T* dscores, T* dq, T* dk, T* dw_partial, int64_t b0, int64_t b1) { \
    backward_impl(a, dscores, dq, dk, dw_partial, b0, b1);                                                             \
  }
ATTNLAB_ADDITIVE_KERNEL_DEFINITIONS(float)
ATTNLAB_ADDITIVE_KERNEL_DEFINITIONS(double)
#undef ATTNLAB_ADDITIVE_KERNEL_DEFINITIONS

}  // namespace attnlab::scorers::additive::kernels::ATTNLAB_ADDITIVE_ISA
