// SequenceRegressor's key function and the helpers regression models share.
#include <attnlab/nn/regression.hpp>

#include <torch/torch.h>

namespace attnlab::nn {

SequenceRegressor::~SequenceRegressor() = default;

void xavier_uniform_init(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);
  }
}

torch::Tensor shift_target(const torch::Tensor& src, const torch::Tensor& target) {
  TORCH_CHECK(src.dim() == 3 && target.dim() == 3 && src.size(0) == target.size(0) && src.size(2) == target.size(2),
              "shift_target: expected src [B, S, F] and target [B, T, F], found ", src.sizes(), " and ",
              target.sizes());
  const int64_t steps = target.size(1);
  return torch::cat({src.narrow(1, src.size(1) - 1, 1), target.narrow(1, 0, steps - 1)}, 1);  // [B, T, F]
}

}  // namespace attnlab::nn
