// MKL's CPU-vendor check, answered for AMD (and other non-Intel x86-64) CPUs too.
//
// The MKL that the torch wheel links into libtorch_cpu.so picks its kernels by asking
// mkl_serv_intel_cpu_true() whether the CPU is Intel's; on AMD it is told no and runs a generic
// SSE path for sgemm, though the CPU has the AVX2/FMA the fast path needs. libtorch_cpu.so exports
// that function and calls it through the PLT, so this definition in the runner (an executable's
// symbols come first in the dynamic lookup) answers instead. Measured on this project's AMD EPYC VM,
// fp32 torch.mm per CPU-second: 2048^3 85 -> 102 GFLOP/s, the seed-000 step's 1152x256x256
// 69 -> 97, d2l 0.17's 640x32x32 56 -> 87 (bench/README.md).
//
// The answer is "yes" unless ATTNLAB_MKL_CPU_CHECK=1 asks for MKL's own check. MKL only calls
// this for its code-path choice; a CPU without AVX2 still gets MKL's checks on the instruction
// sets themselves (mkl_serv_cpuhas*), which are not touched.
#include <cpuid.h>

#include <cstdlib>
#include <cstring>

namespace {

/// Whether the CPU says it is Intel's (vendor string "GenuineIntel"; AMD says "AuthenticAMD").
bool intel_cpu() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
}

bool avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

}  // namespace

extern "C" __attribute__((visibility("default"), used)) int mkl_serv_intel_cpu_true() {
  static const int answer = [] {
    const char* own = std::getenv("ATTNLAB_MKL_CPU_CHECK");
    if (own != nullptr && std::strcmp(own, "1") == 0) return intel_cpu() ? 1 : 0;
    return intel_cpu() || avx2_fma() ? 1 : 0;
  }();
  return answer;
}
