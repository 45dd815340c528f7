#pragma once
// Plugin kind "scorer": raw attention scores. The framework masks, softmaxes, applies dropout
// and pools the values (nn/attention.hpp), so every scorer shares one masked softmax.
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <optional>

namespace attnlab::nn {

class Scorer : public torch::nn::Module {
 public:
  ~Scorer() override = default;
  /// queries [B, Q, Dq], keys [B, K, Dk] -> scores [B, Q, K], before masking and softmax.
  virtual torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys) = 0;
  /// Optional fused path used when weights are not being recorded (e.g. SDPA).
  /// queries [B, Q, D], keys [B, K, D], values [B, K, Dv], valid_lens [B] / [B, Q] / undefined
  /// -> [B, Q, Dv]. nullopt = not supported, the framework uses score() + masked softmax.
  virtual std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                              const torch::Tensor& values, const torch::Tensor& valid_lens,
                                              double dropout, bool training) {
    return std::nullopt;
  }
};

}  // namespace attnlab::nn

template <>
struct attnlab::plugin::KindOf<attnlab::nn::Scorer> {
  static constexpr const char* value = "scorer";
};
