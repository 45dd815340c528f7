#pragma once
// Plugin kind "model": a whole model that is not an encoder + decoder pair built by the framework
// (e.g. a regression model around the transformer stacks). A trainer that accepts one knows which
// SDK interface (a subclass of Model declared in a public header) it implements.
#include <attnlab/nn/recorder.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/module.h>

namespace attnlab::nn {

/// Its attention records into the active AttentionRecorder (nn/recorder.hpp).
class Model : public torch::nn::Module {
 public:
  ~Model() override = default;
};

/// Number of trainable parameters of any module.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace attnlab::nn

template <>
struct attnlab::plugin::KindOf<attnlab::nn::Model> {
  static constexpr const char* value = "model";
};
