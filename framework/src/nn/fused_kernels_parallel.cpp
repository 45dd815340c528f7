// The fused residual and softmax kernels over all rows or elements (nn/fused_kernels.hpp):
// at::parallel_for tasks, each running the baseline or the AVX2 row loops. Compiled with -fopenmp
// and without the shared PCH (framework/CMakeLists.txt), as ATen's kernels are: at::parallel_for
// forks only in code built with OpenMP, and here it calls into the libgomp LibTorch ships.
#include "nn/fused_kernels.hpp"

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <algorithm>
#include <string>
#include <vector>

namespace attnlab::nn::fused::kernels {
namespace {

// Elements per at::parallel_for task. Handing a task to another thread costs microseconds, as much
// as normalising tens of thousands of elements, so the residual streams of small models
// ([64, 10, 32]: 20480 elements) stay on the calling thread and only large ones are split.
constexpr int64_t kGrain = 32768;

/// Rows per task (forward) and per chunk of the weight/bias gradient sums (backward). A function
/// of the width alone, so those sums, and their order, do not depend on the thread count.
int64_t rows_per_task(int64_t width) { return std::max<int64_t>(1, kGrain / width); }

#if defined(ATTNLAB_FUSED_AVX2)
/// Whether to run the AVX2 kernels: where ATen runs its own at AVX2 or AVX-512
/// (at::get_cpu_capability(), which ATEN_CPU_CAPABILITY=default turns to the baseline).
bool use_avx2() {
  static const bool yes = [] {
    const std::string capability = at::get_cpu_capability();
    return capability == "AVX2" || capability.starts_with("AVX512");
  }();
  return yes;
}

#define ATTNLAB_FUSED_CALL(kernel, ...) (use_avx2() ? avx2::kernel(__VA_ARGS__) : baseline::kernel(__VA_ARGS__))
#else
#define ATTNLAB_FUSED_CALL(kernel, ...) baseline::kernel(__VA_ARGS__)
#endif

template <class T>
void norm_forward_rows(const NormForward<T>& a, int64_t rows) {
  at::parallel_for(0, rows, rows_per_task(a.H),
                   [&](int64_t r0, int64_t r1) { ATTNLAB_FUSED_CALL(norm_forward, a, r0, r1); });
}

/// The backward over fixed chunks of rows, then dw, db = the chunks' partial sums in order.
template <class T>
void norm_backward_chunks(NormBackward<T> a, T* dw, T* db) {
  a.chunk = rows_per_task(a.H);
  const int64_t chunks = (a.rows + a.chunk - 1) / a.chunk;
  std::vector<T> partial(dw != nullptr ? chunks * 2 * a.H : 0);  // [chunks, 2, H]: dw's, db's
  a.partial = dw != nullptr ? partial.data() : nullptr;
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) { ATTNLAB_FUSED_CALL(norm_backward, a, c0, c1); });
  if (dw == nullptr) return;
  std::fill(dw, dw + a.H, T(0));
  std::fill(db, db + a.H, T(0));
  for (int64_t c = 0; c < chunks; ++c) {
    const T* pw = partial.data() + c * 2 * a.H;
    for (int64_t j = 0; j < a.H; ++j) {
      dw[j] += pw[j];
      db[j] += pw[a.H + j];
    }
  }
}

template <class T>
void add_dropout_forward_elements(const T* x, const T* y, int64_t n, const Dropout& d, bool* keep, T* out) {
  at::parallel_for(0, n, kGrain, [&](int64_t e0, int64_t e1) {
    ATTNLAB_FUSED_CALL(add_dropout_forward, x, y, d, keep, out, e0, e1);
  });
}

template <class T>
void add_dropout_backward_elements(const T* dout, const bool* keep, double keep_prob, int64_t n, T* dy) {
  at::parallel_for(0, n, kGrain, [&](int64_t e0, int64_t e1) {
    ATTNLAB_FUSED_CALL(add_dropout_backward, dout, keep, keep_prob, dy, e0, e1);
  });
}

/// Rows per task of the softmax: as many as hold about kGrain weights.
template <class T>
void softmax_forward_rows(const SoftmaxForward<T>& a, int64_t rows) {
  at::parallel_for(0, rows, rows_per_task(a.K),
                   [&](int64_t r0, int64_t r1) { ATTNLAB_FUSED_CALL(softmax_forward, a, r0, r1); });
}

template <class T>
void softmax_backward_rows(const SoftmaxBackward<T>& a, int64_t rows) {
  at::parallel_for(0, rows, rows_per_task(a.K),
                   [&](int64_t r0, int64_t r1) { ATTNLAB_FUSED_CALL(softmax_backward, a, r0, r1); });
}

#undef ATTNLAB_FUSED_CALL

}  // namespace

#define ATTNLAB_FUSED_PARALLEL_DEFINITIONS(T)                                                             \
  void norm_forward_all(const NormForward<T>& a, int64_t rows) { norm_forward_rows(a, rows); }            \
  void norm_backward_all(NormBackward<T> a, T* dw, T* db) { norm_backward_chunks(a, dw, db); }            \
  void add_dropout_forward_all(const T* x, const T* y, int64_t n, const Dropout& d, bool* keep, T* out) { \
    add_dropout_forward_elements(x, y, n, d, keep, out);                                                  \
  }                                                                                                       \
  void add_dropout_backward_all(const T* dout, const bool* keep, double keep_prob, int64_t n, T* dy) {    \
    add_dropout_backward_elements(dout, keep, keep_prob, n, dy);                                          \
  }                                                                                                       \
  void softmax_forward_all(const SoftmaxForward<T>& a, int64_t rows) { softmax_forward_rows(a, rows); }   \
  void softmax_backward_all(const SoftmaxBackward<T>& a, int64_t rows) { softmax_backward_rows(a, rows); }
ATTNLAB_FUSED_PARALLEL_DEFINITIONS(float)
ATTNLAB_FUSED_PARALLEL_DEFINITIONS(double)
#undef ATTNLAB_FUSED_PARALLEL_DEFINITIONS

}  // namespace attnlab::nn::fused::kernels
