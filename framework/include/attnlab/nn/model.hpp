#pragma once
// Plugin kind "model": a whole model that is not an encoder + decoder pair built by the framework
// (e.g. a regression model around the transformer stacks). A trainer that accepts one knows which
// SDK interface (a subclass of Model declared in a public header) it implements.
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/module.h>

namespace attnlab::nn {

class Model : public torch::nn::Module {
 public:
  ~Model() override = default;
  /// Record attention weights on subsequent forwards (evaluation/prediction only).
  virtual void set_recording(bool on) { recording_ = on; }
  /// Weights of the last forward while recording: module -> [layers, B, heads, Q, K].
  virtual AttentionMap attention() const { return {}; }

 protected:
  bool recording_ = false;
};

/// Number of trainable parameters of any module.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace attnlab::nn

template <>
struct attnlab::plugin::KindOf<attnlab::nn::Model> {
  static constexpr const char* value = "model";
};
