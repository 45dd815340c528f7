// FusedAdam and clip_grad_norm (see the header).
#include <attnlab/train/optim.hpp>

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/_fused_adam.h>
#include <c10/util/ParallelGuard.h>
#include <torch/torch.h>

#include <map>
#include <unordered_set>

namespace attnlab::train {

namespace {

/// The fused kernel takes one device and one floating dtype per call, dense gradients only.
bool fusable(const std::vector<torch::Tensor>& params) {
  for (const auto& p : params) {
    const auto& g = p.grad();
    if (g.is_sparse() || p.device() != params.front().device() || p.scalar_type() != params.front().scalar_type() ||
        g.scalar_type() != p.scalar_type() || !torch::isFloatingType(p.scalar_type())) {
      return false;
    }
  }
  return true;
}

}  // namespace

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  std::vector<std::vector<torch::Tensor>> with_grad;  // per group
  std::unordered_set<const void*> seen;  // a tied weight listed twice is updated once
  for (auto& group : param_groups()) {
    auto& params = with_grad.emplace_back();
    for (const auto& p : group.params()) {
      if (p.grad().defined() && seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
    }
    if (!params.empty() && !fusable(params)) {
      // Rare: leave the whole step to the per-parameter implementation (same state layout).
      torch::optim::Adam::step(nullptr);
      return loss;
    }
  }
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const auto& group = param_groups()[g];
    const auto& params = with_grad[g];
    if (params.empty()) continue;
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<torch::Tensor> grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    grads.reserve(params.size());
    exp_avgs.reserve(params.size());
    exp_avg_sqs.reserve(params.size());
    steps.reserve(params.size());
    std::map<int64_t, torch::Tensor> step_tensors;  // one 0-dim tensor per step count (normally one)
    const auto float_opts = torch::TensorOptions(torch::kFloat32).device(params.front().device());
    for (const auto& p : params) {
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      s.step(s.step() + 1);
      auto [it, fresh] = step_tensors.try_emplace(s.step());
      if (fresh) it->second = torch::full({}, static_cast<double>(s.step()), float_opts);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      steps.push_back(it->second);
    }
    auto fused = [&](const std::vector<size_t>& which) {
      if (which.empty()) return;
      auto pick = [&](const std::vector<torch::Tensor>& all) {
        std::vector<torch::Tensor> out;
        out.reserve(which.size());
        for (auto i : which) out.push_back(all[i]);
        return out;
      };
      at::_fused_adam_(pick(params), pick(grads), pick(exp_avgs), pick(exp_avg_sqs),
                       o.amsgrad() ? pick(max_exp_avg_sqs) : std::vector<torch::Tensor>{}, pick(steps), o.lr(),
                       std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(), o.amsgrad(),
                       /*maximize=*/false);
    };
    std::vector<size_t> all(params.size()), small, large;
    for (size_t i = 0; i < params.size(); ++i) {
      all[i] = i;
      (params[i].numel() < at::internal::GRAIN_SIZE ? small : large).push_back(i);
    }
    if (!params.front().device().is_cpu()) {
      fused(all);
      continue;
    }
    // The CPU kernel splits every tensor over the intra-op threads whatever its size (grain 0):
    // a thread hand-off per small tensor. Small tensors are updated on this thread, as torch's
    // elementwise ops do below GRAIN_SIZE elements; large ones in parallel.
    fused(large);
    c10::ParallelGuard serial(true);
    fused(small);
  }
  return loss;
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  std::unordered_set<const void*> seen;  // a tied weight listed twice counts and is scaled once
  for (const auto& p : params) {
    if (p.grad().defined() && seen.insert(p.unsafeGetTensorImpl()).second) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({});
  torch::NoGradGuard no_grad;
  const auto norms = at::_foreach_norm(grads, 2);
  auto total = norms.size() == 1 ? norms[0] : torch::linalg_vector_norm(torch::stack(norms), 2);
  auto coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
  at::_foreach_mul_(grads, coef);
  return total;
}

}  // namespace attnlab::train
