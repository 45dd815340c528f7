// The fused residual kernels for the baseline ISA (nn/fused_kernels.hpp).
#define ATTNLAB_FUSED_ISA baseline
#include "nn/fused_kernels_impl.hpp"
#include "nn/fused_softmax_impl.hpp"
