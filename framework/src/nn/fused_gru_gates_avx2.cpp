// The gate kernels for AVX2 + FMA (framework/CMakeLists.txt compiles this file with -mavx2 -mfma
// and CPU_CAPABILITY_AVX2); fused_gru_gates.cpp calls them only on a machine that has both.
#define ATTNLAB_GRU_KERNEL_NS kernel_avx2
#include "nn/fused_gru_gates_rows.hpp"
