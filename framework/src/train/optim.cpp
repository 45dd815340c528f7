// FusedAdam and clip_grad_norm (see the header).
#include <attnlab/train/optim.hpp>

#include <ATen/Dispatch.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/_fused_adam.h>
#include <c10/util/ParallelGuard.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
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

/// Adam's update of one small contiguous CPU tensor as a plain loop, in the arithmetic of torch's
/// CPU fused kernel (its bias corrections in double, the update per element in T): no dispatch, no
/// item() of a step tensor (which at::_fused_adam_ reads per tensor), no grad.contiguous().
template <class T>
void adam_loop(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, int64_t step, double lr, double beta1, double beta2,
               double weight_decay, double eps) {
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const T step_size = static_cast<T>(lr / bias_correction1);
  const T bias_correction2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(beta2, static_cast<double>(step))));
  const T b1 = static_cast<T>(beta1), c1 = static_cast<T>(1 - beta1);
  const T b2 = static_cast<T>(beta2), c2 = static_cast<T>(1 - beta2);
  const T wd = static_cast<T>(weight_decay), e = static_cast<T>(eps);
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if (weight_decay != 0) gi += p[i] * wd;
    m[i] = m[i] * b1 + gi * c1;
    v[i] = v[i] * b2 + gi * gi * c2;
    const T second = vmax != nullptr ? (vmax[i] = std::max(vmax[i], v[i])) : v[i];
    p[i] = p[i] - step_size * m[i] / (std::sqrt(second) / bias_correction2_sqrt + e);
  }
}

/// Whether adam_loop takes p and its state: CPU, float or double, below the parallel grain (where
/// the fused kernel's thread hand-off is all overhead), everything contiguous.
bool loopable(const torch::Tensor& p, const torch::optim::AdamParamState& s, bool amsgrad) {
  const auto& g = p.grad();
  const auto dtype = p.scalar_type();
  return p.device().is_cpu() && (dtype == torch::kFloat || dtype == torch::kDouble) &&
         p.numel() < at::internal::GRAIN_SIZE && p.is_contiguous() && g.is_contiguous() &&
         s.exp_avg().is_contiguous() && s.exp_avg_sq().is_contiguous() &&
         (!amsgrad || s.max_exp_avg_sq().is_contiguous());
}

/// clip_grad_norm's plain loops take gradients up to this many elements in all: a small model's
/// (d2l 0.17's Transformer has about 70,000), where torch's foreach norm and scale (one
/// linalg_vector_norm and one mul_ per tensor on the CPU, plus the stack and the clamp) are all
/// dispatch. Above it the foreach ops' threads and vectors win.
constexpr int64_t kClipLoopElements = 1 << 18;

bool clip_loopable(const std::vector<torch::Tensor>& grads) {
  int64_t elements = 0;
  for (const auto& g : grads) {
    const auto dtype = g.scalar_type();
    if (!g.device().is_cpu() || g.layout() != torch::kStrided || !g.is_contiguous() ||
        (dtype != torch::kFloat && dtype != torch::kDouble)) {
      return false;
    }
    elements += g.numel();
  }
  return elements <= kClipLoopElements;
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
  std::unordered_set<const void*> seen;               // a tied weight listed twice is updated once
  for (auto& group : param_groups()) {
    auto& params = with_grad.emplace_back();
    for (const auto& p : group.params()) {
      if (p.grad().defined() && seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
    }
    if (!params.empty() && !fusable(params)) {
      TORCH_CHECK(!device_step_.defined(),
                  "FusedAdam: graph-safe steps need the fused kernel, but the parameters mix devices or dtypes, or "
                  "have sparse gradients");
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
    // The CPU kernel splits every tensor over the intra-op threads whatever its size (grain 0):
    // a thread hand-off per small tensor, and reads each tensor's step count with item(). On the
    // CPU, tensors below GRAIN_SIZE elements are updated right here by adam_loop (contiguous float
    // or double), or go into a second call run on this thread, as torch's own elementwise ops do
    // at that size.
    const bool cpu = params.front().device().is_cpu();
    std::array<std::array<std::vector<torch::Tensor>, 6>, 2> parts;  // [parallel, serial][p, g, m, v, vmax, t]
    std::map<int64_t, torch::Tensor> step_tensors;                   // one 0-dim tensor per step count (normally one)
    const auto float_opts = torch::TensorOptions(torch::kFloat32).device(params.front().device());
    for (const auto& p : params) {
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {  // graph-safe steps: the first (eager) step, never inside a capture
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      s.step(s.step() + 1);
      if (!device_step_.defined() && !device_lr_.defined() && loopable(p, s, o.amsgrad())) {
        const auto [beta1, beta2] = o.betas();
        AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "attnlab::adam_loop", [&] {
          adam_loop<scalar_t>(p.data_ptr<scalar_t>(), p.grad().const_data_ptr<scalar_t>(),
                              s.exp_avg().data_ptr<scalar_t>(), s.exp_avg_sq().data_ptr<scalar_t>(),
                              o.amsgrad() ? s.max_exp_avg_sq().data_ptr<scalar_t>() : nullptr, p.numel(), s.step(),
                              o.lr(), beta1, beta2, o.weight_decay(), o.eps());
        });
        p.unsafeGetTensorImpl()->bump_version();  // as an in-place op would: a graph that saved p refuses it
        continue;
      }
      torch::Tensor step = device_step_;  // graph-safe: what the caller set; else one per count
      if (!step.defined()) {
        auto [it, fresh] = step_tensors.try_emplace(s.step());
        if (fresh) it->second = torch::full({}, static_cast<double>(s.step()), float_opts);
        step = it->second;
      }
      auto& part = parts[cpu && p.numel() < at::internal::GRAIN_SIZE ? 1 : 0];
      part[0].push_back(p);
      part[1].push_back(p.grad());
      part[2].push_back(s.exp_avg());
      part[3].push_back(s.exp_avg_sq());
      if (o.amsgrad()) part[4].push_back(s.max_exp_avg_sq());
      part[5].push_back(step);
    }
    for (size_t serial = 0; serial < parts.size(); ++serial) {
      const auto& [ps, gs, ms, vs, vmaxs, ts] = parts[serial];
      if (ps.empty()) continue;
      std::optional<c10::ParallelGuard> on_this_thread;
      if (serial == 1) on_this_thread.emplace(true);
      const auto [beta1, beta2] = o.betas();
      if (device_lr_.defined()) {
        at::_fused_adam_(ps, gs, ms, vs, vmaxs, ts, device_lr_, beta1, beta2, o.weight_decay(), o.eps(), o.amsgrad(),
                         /*maximize=*/false);
      } else {
        at::_fused_adam_(ps, gs, ms, vs, vmaxs, ts, o.lr(), beta1, beta2, o.weight_decay(), o.eps(), o.amsgrad(),
                         /*maximize=*/false);
      }
    }
  }
  return loss;
}

void FusedAdam::use_device_scalars(torch::Tensor lr, torch::Tensor step) {
  TORCH_CHECK(lr.defined() && step.defined() && lr.dim() == 0 && step.dim() == 0 && lr.scalar_type() == torch::kFloat &&
                  step.scalar_type() == torch::kFloat,
              "FusedAdam::use_device_scalars: expected two 0-dim float32 tensors");
  device_lr_ = std::move(lr);
  device_step_ = std::move(step);
}

void FusedAdam::count_replayed_step() {
  for (auto& [key, slot] : state_) {
    auto& st = static_cast<torch::optim::AdamParamState&>(*slot);
    st.step(st.step() + 1);
  }
}

void FusedAdam::set_step_count(int64_t steps) {
  for (auto& [key, slot] : state_) static_cast<torch::optim::AdamParamState&>(*slot).step(steps);
}

int64_t FusedAdam::steps_taken() const {
  int64_t most = 0;
  for (const auto& [key, slot] : state_) {
    most = std::max(most, static_cast<const torch::optim::AdamParamState&>(*slot).step());
  }
  return most;
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
  if (clip_loopable(grads)) {  // the same norm and scale, summed in double, no op per tensor
    double squares = 0;
    for (const auto& g : grads) {
      AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "attnlab::clip_grad_norm", [&] {
        const scalar_t* x = g.const_data_ptr<scalar_t>();
        for (int64_t i = 0, n = g.numel(); i < n; ++i) squares += static_cast<double>(x[i]) * x[i];
      });
    }
    const double total = std::sqrt(squares);
    const double coef = std::min(max_norm / (total + 1e-6), 1.0);
    if (coef < 1.0) {
      for (const auto& g : grads) {
        AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "attnlab::clip_grad_scale", [&] {
          scalar_t* x = g.data_ptr<scalar_t>();
          const auto c = static_cast<scalar_t>(coef);
          for (int64_t i = 0, n = g.numel(); i < n; ++i) x[i] *= c;
        });
        g.unsafeGetTensorImpl()->bump_version();
      }
    }
    return torch::scalar_tensor(total, grads.front().options());
  }
  const auto norms = at::_foreach_norm(grads, 2);
  auto total = norms.size() == 1 ? norms[0] : torch::linalg_vector_norm(torch::stack(norms), 2);
  auto coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
  at::_foreach_mul_(grads, coef);
  return total;
}

}  // namespace attnlab::train
