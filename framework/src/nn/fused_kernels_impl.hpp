// The row loops of the fused residual kernels (nn/fused_kernels.hpp), included once per ISA with
// ATTNLAB_FUSED_ISA naming its namespace. Everything but the entry points has internal linkage,
// and at::vec::Vectorized lives in a namespace per ATen CPU capability, so the two copies never
// meet at link time. No include guard: each including file compiles it once.
#include "nn/fused_kernels.hpp"

#include <ATen/cpu/vec/vec.h>

#if defined(CPU_CAPABILITY_AVX2)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnlab::nn::fused::kernels::ATTNLAB_FUSED_ISA {
namespace {

template <class T>
using Vec = at::vec::Vectorized<T>;

// ------------------------------------------------------------------------------------ dropout mask
// Philox 4x32-10 as at::Philox4_32 computes it, 8 counters (32 draws) at a time: with AVX2 in
// vector registers, one counter per lane (at::Philox4_32 yields one word per call, with a branch).
constexpr uint32_t kPhiloxA = 0x9E3779B9, kPhiloxB = 0xBB67AE85;    // key increments
constexpr uint32_t kPhiloxSA = 0xD2511F53, kPhiloxSB = 0xCD9E8D57;  // multipliers

/// Bit 4 i + w: whether word w of counter first + i (i < 8) under `seed` is >= threshold.
uint32_t keep_bits_scalar(uint64_t seed, uint64_t first, uint32_t threshold) {
  uint32_t bits = 0;
  for (int i = 0; i < 8; ++i) {
    const uint64_t c = first + static_cast<uint64_t>(i);
    uint32_t c0 = static_cast<uint32_t>(c), c1 = static_cast<uint32_t>(c >> 32), c2 = 0, c3 = 0;  // subsequence 0
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(kPhiloxSA) * c0;
      const uint64_t p1 = static_cast<uint64_t>(kPhiloxSB) * c2;
      c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      k0 += kPhiloxA;
      k1 += kPhiloxB;
    }
    const uint32_t words[4] = {c0, c1, c2, c3};
    for (int w = 0; w < 4; ++w) bits |= static_cast<uint32_t>(words[w] >= threshold) << (4 * i + w);
  }
  return bits;
}

#if defined(CPU_CAPABILITY_AVX2)
/// 8-bit lane masks spread out: bit i -> bit 4 i.
struct Spread {
  uint32_t table[256];
  constexpr Spread() : table() {
    for (uint32_t m = 0; m < 256; ++m) {
      for (uint32_t i = 0; i < 8; ++i) table[m] |= ((m >> i) & 1U) << (4 * i);
    }
  }
};
constexpr Spread kSpread;

/// The high and low 32 bits of a * b, lane by lane.
inline void mulhilo(__m256i a, __m256i b, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, b);                                               // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));  // lanes 1, 3, 5, 7
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

uint32_t keep_bits(uint64_t seed, uint64_t first, uint32_t threshold) {
  // The low words of the 8 counters must not wrap (once in 2^32 blocks; left to the scalar code).
  if (static_cast<uint32_t>(first) > 0xFFFFFFFFU - 7) return keep_bits_scalar(seed, first, threshold);
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first))),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32)));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const __m256i sa = _mm256_set1_epi32(static_cast<int>(kPhiloxSA)),
                sb = _mm256_set1_epi32(static_cast<int>(kPhiloxSB));
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo(c0, sa, hi0, lo0);
    mulhilo(c2, sb, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += kPhiloxA;
    k1 += kPhiloxB;
  }
  // word >= threshold, unsigned: max(word, threshold) == word.
  const __m256i t = _mm256_set1_epi32(static_cast<int>(threshold));
  auto lanes = [&](__m256i w) {
    return static_cast<uint32_t>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_max_epu32(w, t), w))));
  };
  return kSpread.table[lanes(c0)] | kSpread.table[lanes(c1)] << 1 | kSpread.table[lanes(c2)] << 2 |
         kSpread.table[lanes(c3)] << 3;
}

/// keep[k] = bit k of bits, k < 32.
inline void store_bits(uint32_t bits, bool* keep) {
  // Byte k gets byte k / 8 of bits, keeps its bit k % 8, and becomes 0 or 1.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(keep), _mm256_and_si256(set, _mm256_set1_epi8(1)));
}
#else
uint32_t keep_bits(uint64_t seed, uint64_t first, uint32_t threshold) {
  return keep_bits_scalar(seed, first, threshold);
}

inline void store_bits(uint32_t bits, bool* keep) {
  for (int k = 0; k < 32; ++k) keep[k] = (bits >> k) & 1U;
}
#endif

/// keep[i] for elements e0 + i, i < n (Dropout's definition of the mask).
void draw_keep(const Dropout& d, int64_t e0, int64_t n, bool* keep) {
  const int64_t end = e0 + n;
  int64_t e = e0;
  while (e < end) {
    const int64_t block = e / 32;  // 8 counters, 32 draws
    const uint32_t bits = keep_bits(d.seed, static_cast<uint64_t>(block) * 8, d.threshold);
    if (e == block * 32 && e + 32 <= end) {
      store_bits(bits, keep + (e - e0));
      e += 32;
      continue;
    }
    const int64_t stop = std::min(end, (block + 1) * 32);
    for (; e < stop; ++e) keep[e - e0] = (bits >> (e - block * 32)) & 1U;
  }
}

/// dropout's factor per element: 1 / keep_prob where kept, 0 where dropped (y * 0, as torch's
/// dropout multiplies, so a non-finite y stays visible).
template <class T>
void factors(const bool* keep, int64_t n, T scale, T* factor) {
  for (int64_t j = 0; j < n; ++j) factor[j] = static_cast<T>(keep[j]) * scale;  // no branch: keep is random
}

/// The lanes of v summed in order.
template <class T>
T lane_sum(const Vec<T>& v) {
  T lanes[Vec<T>::size()];
  v.store(lanes);
  T s = 0;
  for (int i = 0; i < Vec<T>::size(); ++i) s += lanes[i];
  return s;
}

// ------------------------------------------------------------------------- layer_norm(x + dropout(y))

template <class T>
void norm_forward_rows(const NormForward<T>& a, int64_t r0, int64_t r1) {
  constexpr int64_t V = Vec<T>::size();
  const int64_t H = a.H;
  const int64_t body = H - H % V;  // columns done V at a time; the rest one by one
  const T scale = T(1) / static_cast<T>(a.d.keep_prob);
  const T inv_h = T(1) / static_cast<T>(H);
  std::vector<T> factor(a.d.active ? H : 0);  // [H] dropout's factor per column of the row
  if (a.d.active) draw_keep(a.d, r0 * H, (r1 - r0) * H, a.keep + r0 * H);
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = a.x + r * H;
    const T* y = a.y != nullptr ? a.y + r * H : nullptr;  // null: layer_norm(x)
    T* z = a.out + r * H;  // z = x + dropout(y), normalised in place below
    Vec<T> acc(T(0));
    T sum = 0;
    int64_t j = 0;
    if (a.d.active) {
      factors(a.keep + r * H, H, scale, factor.data());
      for (; j < body; j += V) {
        auto zj = at::vec::fmadd(Vec<T>::loadu(y + j), Vec<T>::loadu(factor.data() + j), Vec<T>::loadu(x + j));
        zj.store(z + j);
        acc = acc + zj;
      }
      for (; j < H; ++j) sum += z[j] = x[j] + y[j] * factor[j];
    } else if (y == nullptr) {
      for (; j < body; j += V) {
        auto zj = Vec<T>::loadu(x + j);
        zj.store(z + j);
        acc = acc + zj;
      }
      for (; j < H; ++j) sum += z[j] = x[j];
    } else {
      for (; j < body; j += V) {
        auto zj = Vec<T>::loadu(x + j) + Vec<T>::loadu(y + j);
        zj.store(z + j);
        acc = acc + zj;
      }
      for (; j < H; ++j) sum += z[j] = x[j] + y[j];
    }
    const T mean = (lane_sum(acc) + sum) * inv_h;
    // The variance about the mean: a second pass over a row still in L1, no cancellation.
    const Vec<T> vmean(mean);
    acc = Vec<T>(T(0));
    sum = 0;
    for (j = 0; j < body; j += V) {
      auto c = Vec<T>::loadu(z + j) - vmean;
      acc = at::vec::fmadd(c, c, acc);
    }
    for (; j < H; ++j) sum += (z[j] - mean) * (z[j] - mean);
    const T rs = T(1) / std::sqrt((lane_sum(acc) + sum) * inv_h + a.eps);
    a.mean[r] = mean;
    a.rstd[r] = rs;
    const Vec<T> vrs(rs);
    for (j = 0; j < body; j += V) {
      auto h = (Vec<T>::loadu(z + j) - vmean) * vrs;
      at::vec::fmadd(h, Vec<T>::loadu(a.w + j), Vec<T>::loadu(a.b + j)).store(z + j);
    }
    for (; j < H; ++j) z[j] = (z[j] - mean) * rs * a.w[j] + a.b[j];
  }
}

/// z and xhat are recomputed from x, y and the mask rather than saved: saving them would cost a
/// tensor's allocation (and, at seed 000's sizes, its page faults), more than recomputing.
template <class T>
void norm_backward_chunks(const NormBackward<T>& a, int64_t c0, int64_t c1) {
  constexpr int64_t V = Vec<T>::size();
  const int64_t H = a.H;
  const int64_t body = H - H % V;
  const T scale = T(1) / static_cast<T>(a.d.keep_prob);
  const T inv_h = T(1) / static_cast<T>(H);
  std::vector<T> factor(a.d.active ? H : 0), xhat(H);  // [H] each, for the current row
  for (int64_t c = c0; c < c1; ++c) {
    T* pw = a.partial != nullptr ? a.partial + c * 2 * H : nullptr;  // [H] dw of the chunk
    T* pb = pw != nullptr ? pw + H : nullptr;                        // [H] db of the chunk
    if (pw != nullptr) std::fill(pw, pw + 2 * H, T(0));
    const int64_t end = std::min(a.rows, (c + 1) * a.chunk);
    for (int64_t r = c * a.chunk; r < end; ++r) {
      const T* go = a.dout + r * H;
      const T* x = a.x + r * H;
      const T* y = a.y != nullptr ? a.y + r * H : nullptr;  // null: layer_norm(x)
      if (a.d.active) factors(a.keep + r * H, H, scale, factor.data());
      const T mean = a.mean[r], rs = a.rstd[r];
      const Vec<T> vmean(mean), vrs(rs);
      // xhat = (x + dropout(y) - mean) * rstd; g = dout * w; the row's sums of g and g * xhat.
      Vec<T> acc_g(T(0)), acc_gh(T(0));
      T sg = 0, sgh = 0;
      int64_t j = 0;
      for (; j < body; j += V) {
        auto z = a.d.active
                     ? at::vec::fmadd(Vec<T>::loadu(y + j), Vec<T>::loadu(factor.data() + j), Vec<T>::loadu(x + j))
                 : y == nullptr ? Vec<T>::loadu(x + j)
                                : Vec<T>::loadu(x + j) + Vec<T>::loadu(y + j);
        auto h = (z - vmean) * vrs;
        h.store(xhat.data() + j);
        auto gj = Vec<T>::loadu(go + j);
        auto g = gj * Vec<T>::loadu(a.w + j);
        acc_g = acc_g + g;
        acc_gh = at::vec::fmadd(g, h, acc_gh);
        if (pw != nullptr) {
          at::vec::fmadd(gj, h, Vec<T>::loadu(pw + j)).store(pw + j);
          (Vec<T>::loadu(pb + j) + gj).store(pb + j);
        }
      }
      for (; j < H; ++j) {
        const T z = a.d.active ? x[j] + y[j] * factor[j] : y == nullptr ? x[j] : x[j] + y[j];
        xhat[j] = (z - mean) * rs;
        const T g = go[j] * a.w[j];
        sg += g;
        sgh += g * xhat[j];
        if (pw != nullptr) {
          pw[j] += go[j] * xhat[j];
          pb[j] += go[j];
        }
      }
      // dz = rstd * (g - mean(g) - xhat * mean(g * xhat))
      const T mg = (lane_sum(acc_g) + sg) * inv_h;
      const T mgh = (lane_sum(acc_gh) + sgh) * inv_h;
      const Vec<T> vmg(mg), vmgh(mgh);
      T* dx = a.dx + r * H;
      T* dy = a.dy != nullptr ? a.dy + r * H : nullptr;
      for (j = 0; j < body; j += V) {
        auto g = Vec<T>::loadu(go + j) * Vec<T>::loadu(a.w + j);
        auto dz = (g - vmg - Vec<T>::loadu(xhat.data() + j) * vmgh) * vrs;
        dz.store(dx + j);
        if (dy != nullptr) (dz * Vec<T>::loadu(factor.data() + j)).store(dy + j);
      }
      for (; j < H; ++j) {
        dx[j] = (go[j] * a.w[j] - mg - xhat[j] * mgh) * rs;
        if (dy != nullptr) dy[j] = dx[j] * factor[j];
      }
    }
  }
}

// ---------------------------------------------------------------------------------- x + dropout(y)
constexpr int64_t kBlock = 256;  // elements per round of mask, factors and arithmetic

template <class T>
void add_dropout_forward_range(const T* x, const T* y, const Dropout& d, bool* keep, T* out, int64_t e0, int64_t e1) {
  constexpr int64_t V = Vec<T>::size();
  const T scale = T(1) / static_cast<T>(d.keep_prob);
  T factor[kBlock];
  for (int64_t s = e0; s < e1; s += kBlock) {
    const int64_t n = std::min(kBlock, e1 - s);
    draw_keep(d, s, n, keep + s);
    factors(keep + s, n, scale, factor);
    int64_t j = 0;
    for (; j + V <= n; j += V) {
      at::vec::fmadd(Vec<T>::loadu(y + s + j), Vec<T>::loadu(factor + j), Vec<T>::loadu(x + s + j)).store(out + s + j);
    }
    for (; j < n; ++j) out[s + j] = x[s + j] + y[s + j] * factor[j];
  }
}

template <class T>
void add_dropout_backward_range(const T* dout, const bool* keep, double keep_prob, T* dy, int64_t e0, int64_t e1) {
  constexpr int64_t V = Vec<T>::size();
  const T scale = T(1) / static_cast<T>(keep_prob);
  T factor[kBlock];
  for (int64_t s = e0; s < e1; s += kBlock) {
    const int64_t n = std::min(kBlock, e1 - s);
    factors(keep + s, n, scale, factor);
    int64_t j = 0;
    for (; j + V <= n; j += V) (Vec<T>::loadu(dout + s + j) * Vec<T>::loadu(factor + j)).store(dy + s + j);
    for (; j < n; ++j) dy[s + j] = dout[s + j] * factor[j];
  }
}

}  // namespace

#define ATTNLAB_FUSED_KERNEL_DEFINITIONS(T)                                                                        \
  void norm_forward(const NormForward<T>& a, int64_t r0, int64_t r1) { norm_forward_rows(a, r0, r1); }             \
  void norm_backward(const NormBackward<T>& a, int64_t c0, int64_t c1) { norm_backward_chunks(a, c0, c1); }        \
  void add_dropout_forward(const T* x, const T* y, const Dropout& d, bool* keep, T* out, int64_t e0, int64_t e1) { \
    add_dropout_forward_range(x, y, d, keep, out, e0, e1);                                                         \
  }                                                                                                                \
  void add_dropout_backward(const T* dout, const bool* keep, double keep_prob, T* dy, int64_t e0, int64_t e1) {    \
    add_dropout_backward_range(dout, keep, keep_prob, dy, e0, e1);                                                 \
  }
ATTNLAB_FUSED_KERNEL_DEFINITIONS(float)
ATTNLAB_FUSED_KERNEL_DEFINITIONS(double)
#undef ATTNLAB_FUSED_KERNEL_DEFINITIONS

}  // namespace attnlab::nn::fused::kernels::ATTNLAB_FUSED_ISA
