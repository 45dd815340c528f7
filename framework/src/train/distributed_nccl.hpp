#pragma once
// ProcessGroupNCCL for the CUDA tensors of a data-parallel run (distributed_nccl.cpp).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace attnlab::train {

/// Whether this build has the NCCL backend (nccl.h was found at configure time).
bool nccl_built();

/// A ProcessGroupNCCL on the store (its communicators are made at the first collective, on the
/// current CUDA device); a ConfigError when built without NCCL.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace attnlab::train
