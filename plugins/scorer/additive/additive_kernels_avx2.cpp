// The additive kernels for AVX2 + FMA (CMakeLists.txt compiles this file with -mavx2 -mfma and
// CPU_CAPABILITY_AVX2); additive_kernels.cpp calls them only on a machine that has both.
#define ATTNLAB_ADDITIVE_ISA avx2
#include "additive_kernels_rows.hpp"
