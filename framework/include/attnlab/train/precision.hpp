#pragma once
// The experiment's `precision:` (fp32 | tf32 | bf16), which trainers honour through
// AutocastScope around their forward pass and loss:
//   fp32  full float32: no TF32 anywhere (cuBLAS and cuDNN both IEEE), no autocast;
//   tf32  float32 weights and activations, but matrix products and cuDNN's RNNs/convolutions on
//         CUDA may use TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32 and
//         torch.backends.cudnn.allow_tf32 = True);
//   bf16  autocast to bfloat16 (torch.autocast(dtype=torch.bfloat16)) on the training device:
//         the ops autocast lists (matrix products, SDPA) run in bf16, the rest (softmax, norms,
//         losses) in fp32; weights, gradients and Adam's moments stay fp32 (the master weights).
// The setting is recorded in the results file as the attribute `precision`. Validation,
// decoding and attention recording run without autocast.
#include <attnlab/error.hpp>

#include <torch/types.h>

#include <string>

namespace attnlab::train {

enum class Precision { fp32, tf32, bf16 };

/// "fp32", "tf32", "bf16".
ATTNLAB_API const char* precision_name(Precision p);
/// The inverse of precision_name; a ConfigError naming the choices for anything else.
ATTNLAB_API Precision parse_precision(const std::string& name);

/// The process-wide part: whether float32 matrix products and cuDNN may use TF32 (tf32: yes;
/// fp32 and bf16: no, so that what autocast leaves in fp32 is computed in fp32).
ATTNLAB_API void apply_precision(Precision p);

/// While alive, with Precision::bf16: autocast to bfloat16 on `device`'s type (CUDA or CPU), as
/// `with torch.autocast(device.type, dtype=torch.bfloat16)`; restores the previous state and
/// drops autocast's cast cache when it ends. Wrap the forward pass and the loss, not backward.
/// With fp32 or tf32 it does nothing.
class ATTNLAB_API AutocastScope {
 public:
  AutocastScope(Precision p, torch::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool was_enabled_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  c10::ScalarType was_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace attnlab::train
