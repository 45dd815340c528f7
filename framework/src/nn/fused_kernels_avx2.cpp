// The fused residual kernels for AVX2 + FMA (nn/fused_kernels.hpp). framework/CMakeLists.txt
// compiles this file alone with -mavx2 -mfma and ATen's CPU_CAPABILITY=AVX2 (so Vectorized is
// ATen's AVX2 one, in its own namespace), and without the shared precompiled header; elsewhere it
// is empty and the dispatcher keeps to the baseline.
#if defined(ATTNLAB_FUSED_AVX2)
#define ATTNLAB_FUSED_ISA avx2
#include "nn/fused_kernels_impl.hpp"
#include "nn/fused_softmax_impl.hpp"
#endif
