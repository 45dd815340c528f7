// The linear layers as one autograd node on the CPU (nn/fused_linear.hpp).
#include "nn/fused_linear.hpp"

#include "nn/fused_attention.hpp"

#include <ATen/Dispatch.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <optional>

namespace attnlab::nn::fused {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// y [N, O] = x [N, I] w^T + b (b null: none).
template <class T>
void forward_loops(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t I, int64_t O) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * I;
    for (int64_t o = 0; o < O; ++o) {
      const T* wr = w + o * I;
      T acc = b != nullptr ? b[o] : T(0);
      for (int64_t i = 0; i < I; ++i) acc += xr[i] * wr[i];
      y[n * O + o] = acc;
    }
  }
}

/// From dy [N, O]: dx [N, I] = dy w, dw [O, I] = dy^T x, db [O] = the column sums of dy; a null
/// output is not computed.
template <class T>
void backward_loops(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db, int64_t N, int64_t I, int64_t O) {
  if (dw != nullptr) std::fill(dw, dw + O * I, T(0));
  if (db != nullptr) std::fill(db, db + O, T(0));
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * I;
    const T* dyr = dy + n * O;
    T* dxr = dx != nullptr ? dx + n * I : nullptr;
    if (dxr != nullptr) std::fill(dxr, dxr + I, T(0));
    for (int64_t o = 0; o < O; ++o) {
      const T g = dyr[o];
      if (db != nullptr) db[o] += g;
      if (dxr != nullptr) {
        const T* wr = w + o * I;
        for (int64_t i = 0; i < I; ++i) dxr[i] += g * wr[i];
      }
      if (dw != nullptr) {
        T* dwr = dw + o * I;
        for (int64_t i = 0; i < I; ++i) dwr[i] += g * xr[i];
      }
    }
  }
}

/// Saves x and weight contiguous (and the bias, only to say that there is one).
struct Linear : torch::autograd::Function<Linear> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                        const std::optional<Tensor>& bias) {
    const auto xc = x.contiguous();
    const auto w = weight.contiguous();
    const int64_t I = w.size(1), O = w.size(0), N = xc.numel() / I;
    auto sizes = x.sizes().vec();
    sizes.back() = O;
    Tensor y;
    if (N * I * O <= kLoopMacs) {
      y = at::empty(sizes, xc.options());
      AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "attnlab::fused_linear", [&] {
        forward_loops(xc.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                      bias ? bias->const_data_ptr<scalar_t>() : nullptr, y.data_ptr<scalar_t>(), N, I, O);
      });
    } else {
      const auto x2 = xc.view({N, I});
      y = (bias ? at::addmm(*bias, x2, w.t()) : at::mm(x2, w.t())).view(sizes);
    }
    if (bias) {
      ctx->save_for_backward({xc, w, *bias});
    } else {
      ctx->save_for_backward({xc, w});
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& w = saved[1];
    const bool has_bias = saved.size() == 3;
    const int64_t I = w.size(1), O = w.size(0), N = x.numel() / I;
    const auto dy = grads[0].contiguous();
    const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    const bool need_b = has_bias && ctx->needs_input_grad(2);
    Tensor dx, dw, db;
    if (torch::GradMode::is_enabled() || N * I * O > kLoopMacs) {
      // BLAS for the large, and torch's differentiable ops for a double backward (create_graph).
      const auto dy2 = dy.view({N, O});
      if (need_x) dx = dy2.mm(w).view(x.sizes());
      if (need_w) dw = dy2.t().mm(x.view({N, I}));
      if (need_b) db = dy2.sum(0);
    } else {
      if (need_x) dx = at::empty_like(x);
      if (need_w) dw = at::empty_like(w);
      if (need_b) db = at::empty({O}, w.options());
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "attnlab::fused_linear_backward", [&] {
        backward_loops(dy.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                       need_x ? dx.data_ptr<scalar_t>() : nullptr, need_w ? dw.data_ptr<scalar_t>() : nullptr,
                       need_b ? db.data_ptr<scalar_t>() : nullptr, N, I, O);
      });
    }
    return {dx, dw, db};
  }
};

bool cpu_strided(const Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !at::isTensorSubclassLike(t) &&
         !t._fw_grad(/*level=*/0).defined();
}

}  // namespace

bool linear_supported(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (composed_only() || at::autocast::is_autocast_enabled(at::kCPU)) return false;
  if (!cpu_strided(x) || !cpu_strided(weight) || x.dim() < 1 || weight.dim() != 2) return false;
  const auto dtype = x.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kDouble) || weight.scalar_type() != dtype) return false;
  if (weight.size(1) < 1 || weight.size(1) != x.size(-1)) return false;
  if (bias.defined()) {
    if (!cpu_strided(bias) || bias.scalar_type() != dtype || bias.dim() != 1 || bias.size(0) != weight.size(0)) {
      return false;
    }
  }
  return true;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!linear_supported(x, weight, bias)) return torch::linear(x, weight, bias);
  return Linear::apply(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

}  // namespace attnlab::nn::fused
