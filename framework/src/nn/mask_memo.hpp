#pragma once
// Masks made once per training step instead of once per attention call. Every layer of an encoder
// masks with the same source lengths, every layer of a decoder with the same causal lengths: the
// tensors derived from one valid-lengths tensor (its per-head repeat, the [B, Q, K] keep mask,
// SDPA's empty rows) are remembered per thread, by that tensor's identity and version, for the
// few tensors used last. A hit returns the very tensors made before, so callers treat them as
// read-only. Tensors that carry no version (inference mode) or need a gradient are not
// remembered.
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace attnlab::nn::memo {

/// What is derived, with its shape parameters (a tag and up to three sizes).
using What = std::array<int64_t, 4>;
enum Tag : int64_t { kRepeatHeads = 1, kValidMask = 2, kSdpaMasks = 3, kValidCounts = 4 };

/// make(), or what it returned for this valid_lens tensor (same TensorImpl, same version) and
/// `what` in one of the last calls on this thread.
std::vector<torch::Tensor> derived(const torch::Tensor& valid_lens, const What& what,
                                   const std::function<std::vector<torch::Tensor>()>& make);

/// Hits and misses on this thread since the last reset (for tests and op-count reports).
struct Stats {
  int64_t hits = 0, misses = 0;
};
Stats stats();
/// Forgets every entry on this thread and zeroes its stats.
void reset();

}  // namespace attnlab::nn::memo
