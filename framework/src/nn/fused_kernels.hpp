#pragma once
// The row loops of the fused residual kernels (nn/fused_add_norm.cpp), written once over
// at::vec::Vectorized in fused_kernels_impl.hpp and compiled twice: for the baseline ISA
// (fused_kernels_baseline.cpp) and for AVX2 + FMA (fused_kernels_avx2.cpp, where Vectorized is
// ATen's AVX2 one; the generic one is an array in memory, several times slower). Only the plain
// structs and the entry points below cross between them.
#include <cstdint>

namespace attnlab::nn::fused::kernels {

/// What dropout does in one call. The mask: element e is kept iff word e % 4 of the Philox 4x32-10
/// block of counter e / 4 under the key `seed` (at::Philox4_32(seed, 0, e / 4)) is >= threshold,
/// whichever thread computes it.
struct Dropout {
  bool active = false;     // a mask is drawn (training, 0 < p < 1); otherwise nothing is dropped
  uint64_t seed = 0;       // the Philox key
  uint32_t threshold = 0;  // floor(p * 2^32): P(keep) = 1 - p
  double keep_prob = 1.0;  // 1 - p; kept elements are scaled by 1 / keep_prob
};

/// layer_norm(x + dropout(y)) of rows [r0, r1). x, y, out, keep [rows, H]; w, b [H]; mean, rstd
/// [rows] (saved for backward). y null (no dropout then): layer_norm(x).
template <class T>
struct NormForward {
  const T* x;
  const T* y;
  const T* w;
  const T* b;
  T* out;
  T* mean;
  T* rstd;
  bool* keep;  // written when d.active
  int64_t H;
  T eps;
  Dropout d;
};

/// Its gradients for the rows of chunks [c0, c1), chunk c being rows [c * chunk, (c + 1) * chunk):
/// dx = dz (z = x + dropout(y), or x when y is null); dy = dz * keep / keep_prob (when dy is given:
/// a mask was drawn and y needs a gradient); dw, db of each chunk into partial [chunks, 2, H] (when given), summed
/// over the chunk's rows in order.
template <class T>
struct NormBackward {
  const T* dout;
  const T* x;
  const T* y;
  const bool* keep;  // when d.active
  const T* w;
  const T* mean;
  const T* rstd;
  T* dx;
  T* dy;       // or null
  T* partial;  // or null
  int64_t rows;
  int64_t H;
  int64_t chunk;
  Dropout d;
};

/// Masked softmax of scaled scores (plus a bias), then dropout, for rows [r0, r1) (the fused
/// attention core, nn/fused_attention.hpp): row r attends to its first valid[r] keys, weights
/// exactly 0 beyond; a row with none (valid[r] == 0) weighs all K keys uniformly, bias or not, as
/// d2l's -1e6 fill gives.
template <class T>
struct SoftmaxForward {
  const T* scores;       // [rows, K]: q k^T, not yet scaled
  const T* bias;         // [rows, K]: added to the scaled scores, or null
  T* probs;              // [rows, K]: softmax(scores * scale) over the valid keys, before dropout
  T* dropped;            // [rows, K]: probs * keep / keep_prob (when d.active)
  bool* keep;            // [rows, K] (when d.active)
  const int64_t* valid;  // [rows]: keys each row attends to, 0..K; null: all K
  int64_t K;
  T scale;
  Dropout d;
};

/// Its gradient: dbias = probs * (g - sum(probs * g)) with g = ddropped * keep / keep_prob
/// (ddropped itself when no mask was drawn), dscores = scale * dbias; 0 on rows with no valid key
/// (their weights are constant).
template <class T>
struct SoftmaxBackward {
  const T* ddropped;     // [rows, K]
  const T* probs;        // [rows, K]
  const bool* keep;      // [rows, K] (when d.active)
  const int64_t* valid;  // [rows] or null
  T* dscores;            // [rows, K] (may be ddropped itself)
  T* dbias;              // [rows, K], or null: not wanted
  int64_t K;
  T scale;
  Dropout d;
};

// Per ISA: norm_forward / norm_backward as above; add_dropout_forward: out = x + dropout(y) and
// keep for elements [e0, e1) (d.active); add_dropout_backward: dy = dout * keep / keep_prob.
#define ATTNLAB_FUSED_KERNEL_DECLARATIONS(T)                                                                      \
  void norm_forward(const NormForward<T>& a, int64_t r0, int64_t r1);                                             \
  void norm_backward(const NormBackward<T>& a, int64_t c0, int64_t c1);                                           \
  void add_dropout_forward(const T* x, const T* y, const Dropout& d, bool* keep, T* out, int64_t e0, int64_t e1); \
  void add_dropout_backward(const T* dout, const bool* keep, double keep_prob, T* dy, int64_t e0, int64_t e1); \
  void softmax_forward(const SoftmaxForward<T>& a, int64_t r0, int64_t r1);                                       \
  void softmax_backward(const SoftmaxBackward<T>& a, int64_t r0, int64_t r1);

namespace baseline {
ATTNLAB_FUSED_KERNEL_DECLARATIONS(float)
ATTNLAB_FUSED_KERNEL_DECLARATIONS(double)
}  // namespace baseline
namespace avx2 {  // defined when built with ATTNLAB_FUSED_AVX2 (x86-64)
ATTNLAB_FUSED_KERNEL_DECLARATIONS(float)
ATTNLAB_FUSED_KERNEL_DECLARATIONS(double)
}  // namespace avx2
#undef ATTNLAB_FUSED_KERNEL_DECLARATIONS

// The same over all rows or elements, split over ATen's intra-op threads (fused_kernels_parallel.cpp),
// each task in the AVX2 copy where ATen runs AVX2 or better itself. norm_backward_all sets a.chunk
// and a.partial, then sums the chunks into dw, db [H] in order (null: no weight/bias gradients).
#define ATTNLAB_FUSED_PARALLEL_DECLARATIONS(T)                                                           \
  void norm_forward_all(const NormForward<T>& a, int64_t rows);                                          \
  void norm_backward_all(NormBackward<T> a, T* dw, T* db);                                               \
  void add_dropout_forward_all(const T* x, const T* y, int64_t n, const Dropout& d, bool* keep, T* out); \
  void add_dropout_backward_all(const T* dout, const bool* keep, double keep_prob, int64_t n, T* dy); \
  void softmax_forward_all(const SoftmaxForward<T>& a, int64_t rows);                                  \
  void softmax_backward_all(const SoftmaxBackward<T>& a, int64_t rows);
ATTNLAB_FUSED_PARALLEL_DECLARATIONS(float)
ATTNLAB_FUSED_PARALLEL_DECLARATIONS(double)
#undef ATTNLAB_FUSED_PARALLEL_DECLARATIONS

/// A Dropout for probability p: when 0 < p < 1, a key drawn from torch's default CPU generator (one
/// draw, under its mutex, whatever the tensor's size: the state checkpoints save and restore);
/// inactive otherwise. Defined in nn/fused_add_norm.cpp.
Dropout draw_dropout(double p);

}  // namespace attnlab::nn::fused::kernels
