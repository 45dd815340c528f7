// The row loops of the fused attention core's masked softmax and dropout (nn/fused_kernels.hpp),
// compiled once per ISA after nn/fused_kernels_impl.hpp, in its namespace: they use its dropout
// mask (draw_keep, factors) and its Vec. No include guard: each including file compiles it once.
namespace attnlab::nn::fused::kernels::ATTNLAB_FUSED_ISA {
namespace {

template <class T>
void softmax_forward_rows(const SoftmaxForward<T>& a, int64_t r0, int64_t r1) {
  constexpr int64_t V = Vec<T>::size();
  const int64_t K = a.K;
  const T scale = a.scale, inv_keep = T(1) / static_cast<T>(a.d.keep_prob);
  const Vec<T> vscale(scale);
  std::vector<T> factor(a.d.active ? K : 0);  // [K] dropout's factor per key of the row
  if (a.d.active) draw_keep(a.d, r0 * K, (r1 - r0) * K, a.keep + r0 * K);
  for (int64_t r = r0; r < r1; ++r) {
    const T* s = a.scores + r * K;
    const T* b = a.bias != nullptr ? a.bias + r * K : nullptr;
    T* p = a.probs + r * K;
    const int64_t n = a.valid != nullptr ? std::clamp<int64_t>(a.valid[r], 0, K) : K;
    if (n == 0) {
      std::fill(p, p + K, T(1) / static_cast<T>(K));
    } else {
      auto z = [&](int64_t j) { return b != nullptr ? s[j] * scale + b[j] : s[j] * scale; };
      T m = z(0);
      for (int64_t j = 1; j < n; ++j) m = std::max(m, z(j));
      const Vec<T> vm(m);
      Vec<T> acc(T(0));
      T sum = 0;
      int64_t j = 0;
      for (; j + V <= n; j += V) {
        const auto sj = Vec<T>::loadu(s + j);
        auto e = (b != nullptr ? at::vec::fmadd(sj, vscale, Vec<T>::loadu(b + j)) - vm : at::vec::fmsub(sj, vscale, vm))
                     .exp();
        e.store(p + j);
        acc = acc + e;
      }
      for (; j < n; ++j) sum += p[j] = std::exp(z(j) - m);
      const T inv = T(1) / (lane_sum(acc) + sum);
      for (j = 0; j < n; ++j) p[j] *= inv;
      std::fill(p + n, p + K, T(0));
    }
    if (!a.d.active) continue;
    factors(a.keep + r * K, K, inv_keep, factor.data());
    T* q = a.dropped + r * K;
    for (int64_t j = 0; j < K; ++j) q[j] = p[j] * factor[j];
  }
}

template <class T>
void softmax_backward_rows(const SoftmaxBackward<T>& a, int64_t r0, int64_t r1) {
  const int64_t K = a.K;
  const T inv_keep = T(1) / static_cast<T>(a.d.keep_prob);
  std::vector<T> factor(a.d.active ? K : 0);
  for (int64_t r = r0; r < r1; ++r) {
    const T* g = a.ddropped + r * K;
    const T* p = a.probs + r * K;
    T* ds = a.dscores + r * K;
    T* db = a.dbias != nullptr ? a.dbias + r * K : nullptr;
    const int64_t n = a.valid != nullptr ? std::clamp<int64_t>(a.valid[r], 0, K) : K;
    if (n == 0) {
      std::fill(ds, ds + K, T(0));
      if (db != nullptr) std::fill(db, db + K, T(0));
      continue;
    }
    if (a.d.active) factors(a.keep + r * K, K, inv_keep, factor.data());
    T dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += p[j] * (a.d.active ? g[j] * factor[j] : g[j]);
    for (int64_t j = 0; j < n; ++j) {
      const T dz = p[j] * ((a.d.active ? g[j] * factor[j] : g[j]) - dot);
      if (db != nullptr) db[j] = dz;
      ds[j] = a.scale * dz;
    }
    std::fill(ds + n, ds + K, T(0));
    if (db != nullptr) std::fill(db + n, db + K, T(0));
  }
}

}  // namespace

#define ATTNLAB_FUSED_SOFTMAX_DEFINITIONS(T)                                                                   \
  void softmax_forward(const SoftmaxForward<T>& a, int64_t r0, int64_t r1) { softmax_forward_rows(a, r0, r1); } \
  void softmax_backward(const SoftmaxBackward<T>& a, int64_t r0, int64_t r1) { softmax_backward_rows(a, r0, r1); }
ATTNLAB_FUSED_SOFTMAX_DEFINITIONS(float)
ATTNLAB_FUSED_SOFTMAX_DEFINITIONS(double)
#undef ATTNLAB_FUSED_SOFTMAX_DEFINITIONS

}  // namespace attnlab::nn::fused::kernels::ATTNLAB_FUSED_ISA
