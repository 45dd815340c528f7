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

  /// Graph-safe steps (attnlab/train/train_step.hpp): from now on the learning rate and the step
  /// count the update reads come from these 0-dim float32 tensors on the parameters' device, which
  /// the caller sets before every step, so that a step() captured in a CUDA graph replays with the
  /// current values (as PyTorch's Adam(capturable=True) with a tensor lr). step() then needs every
  /// parameter's state to exist already (a captured step must not create it) and the fused kernel.
  /// The state's host step counts keep advancing with each step() call, and with
  /// count_replayed_step() for each replay, so checkpoints stay exact.
  void use_device_scalars(torch::Tensor lr, torch::Tensor step);
  /// A replay of a captured step() took a step: the state's step counts advance by one.
  void count_replayed_step();
  /// Steps taken so far (the state's count; 0 before the first step).
  int64_t steps_taken() const;
  /// Sets every parameter state's step count (undoing the count of a step that never ran).
  void set_step_count(int64_t steps);

 private:
  torch::Tensor device_lr_, device_step_;
};

/// Scales the gradients of `params` in place so that their joint 2-norm is at most max_norm
/// (coefficient max_norm / (norm + 1e-6), clamped to 1, as torch.nn.utils.clip_grad_norm_); a
/// tensor listed more than once counts once.
/// Returns the norm before clipping as a 0-dim tensor on the gradients' device (not synchronised).
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace attnlab::train
