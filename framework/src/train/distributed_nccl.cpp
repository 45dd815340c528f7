// The NCCL backend of a CUDA data-parallel run, in a file of its own: ProcessGroupNCCL.hpp includes
// nccl.h, which comes from the torch wheel's dependency nvidia-nccl (the libnccl.so.2 that
// libtorch_cuda.so loads, so header and library are one release). CMake compiles this file with
// ATTNLAB_WITH_NCCL and that include folder when it finds them (framework/CMakeLists.txt), else
// without: a CUDA run under torchrun is then one clear error, and CPU runs (Gloo) are unaffected.
#include "train/distributed_nccl.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#if defined(ATTNLAB_WITH_NCCL)
#if !defined(USE_C10D_NCCL)
#error "ATTNLAB_WITH_NCCL is set but USE_C10D_NCCL is not: this torch was built without NCCL"
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace attnlab::train {

bool nccl_built() {
#if defined(ATTNLAB_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
#if defined(ATTNLAB_WITH_NCCL)
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw ConfigError(
      "distributed run on CUDA: this runner was built without NCCL (CMake found no nccl.h from the torch wheel's "
      "nvidia-nccl package); rebuild with it, or train with device: cpu (Gloo)");
#endif
}

}  // namespace attnlab::train
