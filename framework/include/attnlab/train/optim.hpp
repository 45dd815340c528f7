#pragma once
// The optimizer step and gradient clipping of the trainers, as few ops as torch allows.
//
// torch::optim::Adam runs about eight ops per parameter tensor (plus a state lookup each); for the
// small models this framework is about, that loop costs as much as the model's own kernels.
// FusedAdam keeps Adam's state layout (AdamParamState: step, exp_avg, exp_avg_sq), so it reads
// and writes the same checkpoints, and runs each step as one call of torch's fused kernel
// (at::_fused_adam_, CPU and CUDA), which is PyTorch's `Adam(fused=True)`: same update, computed
// per element in one pass.
//
// torch::nn::utils::clip_grad_norm_ (C++) reads the norm back to the host every call, a device
// sync per step on CUDA; clip_grad_norm here is Python's version: foreach norms, the scale applied
// on the device, nothing read back.
#include <torch/optim/adam.h>

#include <vector>

namespace attnlab::train {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  /// One fused update over each parameter group's parameters with a gradient (a tensor listed
  /// more than once, as a tied weight in Module::parameters(), is updated once). Falls back to
  /// torch::optim::Adam::step for what the fused kernel does not take (sparse gradients, groups
  /// mixing devices or dtypes).
  torch::Tensor step(LossClosure closure = nullptr) override;
};

/// Scales the gradients of `params` in place so that their joint 2-norm is at most max_norm
/// (coefficient max_norm / (norm + 1e-6), clamped to 1, as torch.nn.utils.clip_grad_norm_); a
/// tensor listed more than once counts once.
/// Returns the norm before clipping as a 0-dim tensor on the gradients' device (not synchronised).
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace attnlab::train
