#pragma once
#include <torch/version.h>

namespace attnlab {
/// Bumped whenever an SDK interface (this include/ tree) changes incompatibly.
inline constexpr int kAbiVersion = 1;
inline constexpr const char* kVersion = "0.1.0";
inline constexpr const char* kTorchVersion = TORCH_VERSION;
}  // namespace attnlab
