#pragma once
#include <torch/version.h>

namespace attnlab {
/// The layout of plugin::Descriptor. Whether a plugin's headers match this attnlab's is decided by
/// the SDK hash (ATTNLAB_SDK_HASH: a hash of every public header, made by the build), not by this.
inline constexpr int kAbiVersion = 2;
inline constexpr const char* kVersion = "0.1.0";
inline constexpr const char* kTorchVersion = TORCH_VERSION;
}  // namespace attnlab
