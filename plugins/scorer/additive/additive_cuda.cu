// The additive scores on CUDA (additive_cuda.hpp): s[b, q, k] = Σ_h w[h] tanh(q[b, q, h] + k[b, k, h])
// and its gradients, never materialising the [B, Q, K, H] features eager PyTorch writes and reads
// back (1.3 GB at GNMT's B 128, Q = K = 50, H 1024). Each tanh is computed where it is needed:
// once in the forward kernel, and once in each of the two backward kernels (dq sums over keys,
// dk over queries), which recompute it rather than store it. Compiled without torch's headers:
// plain pointers and a stream; additive_kernels.cpp checks shapes and dtypes and calls these.
#include "additive_cuda.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace attnlab::scorers::additive::cuda {
namespace {

// Forward tile: 8 queries x 32 keys per block of 256 threads, the hidden axis in chunks of 32
// through shared memory (keys stored transposed, so a warp's 32 threads read 32 banks).
constexpr int kTileQ = 8, kTileK = 32, kChunk = 32;
// Backward tiles: 32 hidden units (threadIdx.x) x 8 rows (threadIdx.y), the reduced axis in
// chunks of 32.
constexpr int kTileH = 32, kRows = 8, kReduce = 32;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("additive CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

template <class T>
__global__ void scores_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ w,
                              T* __restrict__ s, int64_t Q, int64_t K, int64_t H) {
  __shared__ T qs[kTileQ][kChunk + 1];
  __shared__ T ks[kChunk][kTileK + 1];
  __shared__ T ws[kChunk];
  const int64_t b = blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileK + tx;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTileK, q0 = static_cast<int64_t>(blockIdx.y) * kTileQ;
  const T* qb = q + b * Q * H;
  const T* kb = k + b * K * H;
  T acc = 0;
  for (int64_t h0 = 0; h0 < H; h0 += kChunk) {
    {  // queries: 8 x 32, one per thread
      const int r = tid / kChunk, c = tid % kChunk;
      const int64_t qi = q0 + r, hi = h0 + c;
      qs[r][c] = (qi < Q && hi < H) ? qb[qi * H + hi] : T(0);
    }
    for (int i = tid; i < kTileK * kChunk; i += kTileQ * kTileK) {  // keys: 32 x 32, transposed
      const int r = i / kChunk, c = i % kChunk;
      const int64_t ki = k0 + r, hi = h0 + c;
      ks[c][r] = (ki < K && hi < H) ? kb[ki * H + hi] : T(0);
    }
    if (tid < kChunk) ws[tid] = (h0 + tid < H) ? w[h0 + tid] : T(0);  // 0 beyond H: adds nothing
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kChunk; ++c) acc += ws[c] * tanh(qs[ty][c] + ks[c][tx]);
    __syncthreads();
  }
  const int64_t qi = q0 + ty, ki = k0 + tx;
  if (qi < Q && ki < K) s[(b * Q + qi) * K + ki] = acc;
}

// dq[b, q, h] = w[h] Σ_k g[b, q, k] (1 - t²), t = tanh(q + k); and each block's share of
// dw[h] = Σ_{q, k} g t, written to dw_partial[b, q tile, h].
template <class T>
__global__ void dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ w,
                          const T* __restrict__ g, T* __restrict__ dq, T* __restrict__ dw_partial, int64_t Q, int64_t K,
                          int64_t H) {
  __shared__ T ks[kReduce][kTileH + 1];
  __shared__ T gs[kRows][kReduce + 1];
  __shared__ T part[kRows][kTileH + 1];
  const int64_t b = blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileH + tx;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kTileH + tx, qi = static_cast<int64_t>(blockIdx.y) * kRows + ty;
  const bool live = h < H && qi < Q;
  const T qv = live ? q[(b * Q + qi) * H + h] : T(0);
  T acc_q = 0, acc_w = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kReduce) {
    for (int i = tid; i < kReduce * kTileH; i += kRows * kTileH) {  // keys: 32 x 32, rows of h
      const int r = i / kTileH, c = i % kTileH;
      const int64_t ki = k0 + r, hi = static_cast<int64_t>(blockIdx.x) * kTileH + c;
      ks[r][c] = (ki < K && hi < H) ? k[(b * K + ki) * H + hi] : T(0);
    }
    for (int i = tid; i < kRows * kReduce; i += kRows * kTileH) {  // dscores: 8 x 32
      const int r = i / kReduce, c = i % kReduce;
      const int64_t qr = static_cast<int64_t>(blockIdx.y) * kRows + r, ki = k0 + c;
      gs[r][c] = (qr < Q && ki < K) ? g[(b * Q + qr) * K + ki] : T(0);  // 0 beyond K: adds nothing
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kReduce; ++c) {
      const T t = tanh(qv + ks[c][tx]);
      const T gv = gs[ty][c];
      acc_q += gv * (T(1) - t * t);
      acc_w += gv * t;
    }
    __syncthreads();
  }
  if (live) dq[(b * Q + qi) * H + h] = w[h] * acc_q;
  part[ty][tx] = live ? acc_w : T(0);
  __syncthreads();
  if (ty == 0 && h < H) {
    T sum = 0;
    for (int r = 0; r < kRows; ++r) sum += part[r][tx];
    dw_partial[(b * gridDim.y + blockIdx.y) * H + h] = sum;
  }
}

// dk[b, k, h] = w[h] Σ_q g[b, q, k] (1 - t²).
template <class T>
__global__ void dk_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ w,
                          const T* __restrict__ g, T* __restrict__ dk, int64_t Q, int64_t K, int64_t H) {
  __shared__ T qs[kReduce][kTileH + 1];
  __shared__ T gs[kReduce][kRows + 1];
  const int64_t b = blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileH + tx;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kTileH + tx, ki = static_cast<int64_t>(blockIdx.y) * kRows + ty;
  const bool live = h < H && ki < K;
  const T kv = live ? k[(b * K + ki) * H + h] : T(0);
  T acc = 0;
  for (int64_t q0 = 0; q0 < Q; q0 += kReduce) {
    for (int i = tid; i < kReduce * kTileH; i += kRows * kTileH) {  // queries: 32 x 32
      const int r = i / kTileH, c = i % kTileH;
      const int64_t qi = q0 + r, hi = static_cast<int64_t>(blockIdx.x) * kTileH + c;
      qs[r][c] = (qi < Q && hi < H) ? q[(b * Q + qi) * H + hi] : T(0);
    }
    for (int i = tid; i < kReduce * kRows; i += kRows * kTileH) {  // dscores: 32 queries x 8 keys
      const int r = i / kRows, c = i % kRows;
      const int64_t qi = q0 + r, kc = static_cast<int64_t>(blockIdx.y) * kRows + c;
      gs[r][c] = (qi < Q && kc < K) ? g[(b * Q + qi) * K + kc] : T(0);
    }
    __syncthreads();
#pragma unroll 8
    for (int r = 0; r < kReduce; ++r) {
      const T t = tanh(qs[r][tx] + kv);
      acc += gs[r][ty] * (T(1) - t * t);
    }
    __syncthreads();
  }
  if (live) dk[(b * K + ki) * H + h] = w[h] * acc;
}

unsigned blocks(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

}  // namespace

int64_t dw_partial_rows(int64_t B, int64_t Q) { return B * static_cast<int64_t>(blocks(Q, kRows)); }

template <class T>
void scores(const T* q, const T* k, const T* w, T* s, int64_t B, int64_t Q, int64_t K, int64_t H, cudaStream_t stream) {
  if (B == 0 || Q == 0 || K == 0) return;
  const dim3 grid(blocks(K, kTileK), blocks(Q, kTileQ), static_cast<unsigned>(B)), block(kTileK, kTileQ);
  scores_kernel<T><<<grid, block, 0, stream>>>(q, k, w, s, Q, K, H);
  check(cudaGetLastError(), "forward");
}

template <class T>
void scores_backward(const T* q, const T* k, const T* w, const T* g, T* dq, T* dk, T* dw_partial, int64_t B, int64_t Q,
                     int64_t K, int64_t H, cudaStream_t stream) {
  if (B == 0 || H == 0) return;
  const dim3 block(kTileH, kRows);
  if (Q > 0) {
    dq_kernel<T><<<dim3(blocks(H, kTileH), blocks(Q, kRows), static_cast<unsigned>(B)), block, 0, stream>>>(
        q, k, w, g, dq, dw_partial, Q, K, H);
    check(cudaGetLastError(), "backward (queries)");
  }
  if (K > 0) {
    dk_kernel<T><<<dim3(blocks(H, kTileH), blocks(K, kRows), static_cast<unsigned>(B)), block, 0, stream>>>(
        q, k, w, g, dk, Q, K, H);
    check(cudaGetLastError(), "backward (keys)");
  }
}

template void scores<float>(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                            cudaStream_t);
template void scores<double>(const double*, const double*, const double*, double*, int64_t, int64_t, int64_t, int64_t,
                             cudaStream_t);
template void scores_backward<float>(const float*, const float*, const float*, const float*, float*, float*, float*,
                                     int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template void scores_backward<double>(const double*, const double*, const double*, const double*, double*, double*,
                                      double*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace attnlab::scorers::additive::cuda
