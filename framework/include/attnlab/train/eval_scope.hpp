#pragma once
// EvalScope: puts a module in evaluation mode for a scope and restores its training flag after,
// so decoding in the middle of training (validation, samples) leaves dropout as it found it.
#include <torch/nn/module.h>

namespace attnlab::train {

class EvalScope {
 public:
  explicit EvalScope(torch::nn::Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

}  // namespace attnlab::train
