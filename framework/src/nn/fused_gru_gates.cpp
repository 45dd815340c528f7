// The gate kernels at the build's baseline ISA, and the run-time choice between them and the AVX2
// copy (fused_gru_gates_avx2.cpp). Compiled with -fopenmp (framework/CMakeLists.txt), as ATen's
// kernels are: at::parallel_for forks only in code built with OpenMP.
#define ATTNLAB_GRU_KERNEL_NS kernel_default
#include "nn/fused_gru_gates_rows.hpp"

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <string>

namespace attnlab::nn::fused_gru {
namespace {

/// The AVX2 kernels where ATen uses AVX2 or better itself (its cpuinfo check, ATEN_CPU_CAPABILITY
/// included): a machine, or a setting, without them gets the baseline ones.
bool use_avx2() {
  static const bool avx2 = [] {
    const std::string capability = at::get_cpu_capability();
    return capability == "AVX2" || capability.starts_with("AVX512");
  }();
  return avx2;
}

/// Rows per thread: at least this many elements of [B, H] (each three transcendentals and a few
/// FMAs) before a fork pays; the d2l models' [64, 32] stays on the calling thread, where the
/// benchmark found thread hand-offs dominating.
int64_t grain_rows(int64_t hidden) {
  constexpr int64_t kGrainElements = 16384;
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, hidden));
}

template <typename T>
void forward_all(const GatesForward<T>& s) {
  at::parallel_for(0, s.batch, grain_rows(s.hidden), [&](int64_t begin, int64_t end) {
    if (use_avx2()) {
      kernel_avx2::forward_rows(s, begin, end);
    } else {
      kernel_default::forward_rows(s, begin, end);
    }
  });
}

template <typename T>
void backward_all(const GatesBackward<T>& s) {
  at::parallel_for(0, s.batch, grain_rows(s.hidden), [&](int64_t begin, int64_t end) {
    if (use_avx2()) {
      kernel_avx2::backward_rows(s, begin, end);
    } else {
      kernel_default::backward_rows(s, begin, end);
    }
  });
}

}  // namespace

void gates_forward(const GatesForward<float>& step) { forward_all(step); }
void gates_forward(const GatesForward<double>& step) { forward_all(step); }
void gates_backward(const GatesBackward<float>& step) { backward_all(step); }
void gates_backward(const GatesBackward<double>& step) { backward_all(step); }

}  // namespace attnlab::nn::fused_gru
