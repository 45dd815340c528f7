#pragma once
// Row-major GEMM on raw pointers through the Fortran BLAS that libtorch_cpu exports (sgemm_ and
// dgemm_: MKL in the PyPI wheel, the same routine at::mm reaches on the CPU). No dispatcher, no
// tensor, no autograd: the fused nodes' products above the loops' size (fused_linear.cpp,
// fused_gru_layer.cpp) were each an addmm or mm plus the views, transposes and conj checks around
// it, about five ATen ops a product. MKL's threads are the ones at::set_num_threads sets.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

extern "C" {
// NOLINTBEGIN(readability-identifier-naming): the BLAS names
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
// MKL's thread-local thread count, the C entry (mkl_service.h's mkl_set_num_threads_local; the
// lower-case symbol is Fortran's, by reference): returns the previous one, 0 = the global setting.
// Weak, so a torch whose BLAS is not MKL links too and skips it.
int MKL_Set_Num_Threads_Local(int nthreads) __attribute__((weak));
// NOLINTEND(readability-identifier-naming)
}

namespace attnlab::nn::blas {

/// Products up to this many multiply-adds run on the calling thread alone. MKL splits smaller ones
/// over its threads too, and waking a passive OpenMP thread costs tens of microseconds on a loaded
/// VM, more than such a product takes (d2l 0.17's layers: [640, 32] x [32, 32], 0.66M).
constexpr int64_t kOneThreadMacs = int64_t(1) << 20;

/// C [m, n] = alpha op(A) op(B) + beta C, all row-major: op(A) is [m, k] (A stored [k, m] when
/// trans_a), op(B) is [k, n] (B stored [n, k] when trans_b); lda, ldb, ldc are the stored rows'
/// strides. beta 0 overwrites C (whatever it held).
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  TORCH_CHECK(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
              "blas::gemm: sizes past 32-bit BLAS integers: ", m, " x ", n, " x ", k);
  // Column-major, C^T = op(B)^T op(A)^T: B's storage is op(B)^T's, A's is op(A)^T's.
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int M = static_cast<int>(n), N = static_cast<int>(m), K = static_cast<int>(k);
  const int LDB = static_cast<int>(std::max<int64_t>(1, ldb)), LDA = static_cast<int>(std::max<int64_t>(1, lda));
  const int LDC = static_cast<int>(std::max<int64_t>(1, ldc));
  const bool one_thread = m * n * k <= kOneThreadMacs && MKL_Set_Num_Threads_Local != nullptr;
  const int previous = one_thread ? MKL_Set_Num_Threads_Local(1) : 0;
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&tb, &ta, &M, &N, &K, &alpha, b, &LDB, a, &LDA, &beta, c, &LDC);
  } else {
    static_assert(std::is_same_v<T, double>, "blas::gemm: float or double");
    dgemm_(&tb, &ta, &M, &N, &K, &alpha, b, &LDB, a, &LDA, &beta, c, &LDC);
  }
  if (one_thread) MKL_Set_Num_Threads_Local(previous);
}

/// m [rows, n] = `bias` [n] in every row: what a GEMM with beta 1 then adds the product to.
template <class T>
void fill_rows(T* m, const T* bias, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(bias, n, m + r * n);
}

/// out [n] = the column sums of m [rows, n]: a bias's gradient from its output's.
template <class T>
void column_sums(const T* m, int64_t rows, int64_t n, T* out) {
  std::fill(out, out + n, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) out[c] += m[r * n + c];
  }
}

}  // namespace attnlab::nn::blas
