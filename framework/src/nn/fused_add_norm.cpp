// Fused residual add + dropout (+ layer norm) on CPU with a hand-written backward
// (attnlab/nn/fused.hpp). The eager composition runs five to eight ops each way (bernoulli_, div_,
// mul, add, native_layer_norm and their backwards), each a dispatch, an allocation and a pass over
// memory; on the widths of the book's models (6..256) that overhead is most of the time.
#include <attnlab/nn/fused.hpp>

#include "nn/fused_attention.hpp"
#include "nn/fused_kernels.hpp"
#include "nn/fused_norm.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace attnlab::nn::fused {
namespace {

using kernels::draw_dropout;
using kernels::Dropout;
using kernels::NormBackward;
using kernels::NormForward;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// layer_norm(x + dropout(y)) as one autograd node. x, y [..., H]; weight, bias [H]. Saves x and
/// y (alive anyway as the residual stream and the sublayer's output), mean and rstd [rows], the mask.
struct AddDropoutLayerNorm : torch::autograd::Function<AddDropoutLayerNorm> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y, const Tensor& weight,
                        const Tensor& bias, Dropout d, double eps, Tensor* keep_out) {
    const auto xc = x.contiguous(), yc = y.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
    const int64_t H = x.size(-1), rows = x.numel() / H;
    auto out = at::empty(x.sizes(), xc.options());  // [..., H]
    auto mean = at::empty({rows}, xc.options());    // [rows]
    auto rstd = at::empty({rows}, xc.options());    // [rows]
    Tensor keep;                                    // [..., H] bool, when a mask is drawn
    if (d.active) keep = at::empty(x.sizes(), xc.options().dtype(at::kBool));
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "attnlab::add_dropout_layer_norm", [&] {
      NormForward<scalar_t> a{xc.const_data_ptr<scalar_t>(),
                              yc.const_data_ptr<scalar_t>(),
                              wc.const_data_ptr<scalar_t>(),
                              bc.const_data_ptr<scalar_t>(),
                              out.data_ptr<scalar_t>(),
                              mean.data_ptr<scalar_t>(),
                              rstd.data_ptr<scalar_t>(),
                              d.active ? keep.data_ptr<bool>() : nullptr,
                              H,
                              static_cast<scalar_t>(eps),
                              d};
      kernels::norm_forward_all(a, rows);
    });
    ctx->save_for_backward({xc, yc, wc, mean, rstd, keep});
    ctx->saved_data["keep_prob"] = d.keep_prob;
    if (keep_out != nullptr) *keep_out = keep;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &y = saved[1], &w = saved[2], &mean = saved[3], &rstd = saved[4], &keep = saved[5];
    const auto dout = grads[0].contiguous();  // [..., H]
    const int64_t H = x.size(-1), rows = x.numel() / H;
    const bool need_y = ctx->needs_input_grad(1);
    const bool affine = ctx->needs_input_grad(2) || ctx->needs_input_grad(3);
    auto dx = at::empty(x.sizes(), x.options());  // [..., H]
    Tensor dy = keep.defined() && need_y ? at::empty(x.sizes(), x.options()) : Tensor();
    Tensor dw = affine ? at::empty({H}, w.options()) : Tensor();
    Tensor db = affine ? at::empty({H}, w.options()) : Tensor();
    Dropout d;
    d.active = keep.defined();
    d.keep_prob = ctx->saved_data["keep_prob"].toDouble();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "attnlab::add_dropout_layer_norm_backward", [&] {
      NormBackward<scalar_t> a{dout.const_data_ptr<scalar_t>(),
                               x.const_data_ptr<scalar_t>(),
                               y.const_data_ptr<scalar_t>(),
                               d.active ? keep.const_data_ptr<bool>() : nullptr,
                               w.const_data_ptr<scalar_t>(),
                               mean.const_data_ptr<scalar_t>(),
                               rstd.const_data_ptr<scalar_t>(),
                               dx.data_ptr<scalar_t>(),
                               dy.defined() ? dy.data_ptr<scalar_t>() : nullptr,
                               nullptr,
                               rows,
                               H,
                               0,
                               d};
      kernels::norm_backward_all(a, affine ? dw.data_ptr<scalar_t>() : nullptr,
                                 affine ? db.data_ptr<scalar_t>() : nullptr);
    });
    if (!keep.defined() && need_y) dy = dx;  // no dropout: z = x + y
    return {dx, dy, dw, db, Tensor(), Tensor(), Tensor()};
  }
};

/// layer_norm(x) as one autograd node. x [..., H]; weight, bias [H]. Saves x, mean and rstd [rows].
struct LayerNorm : torch::autograd::Function<LayerNorm> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
    const auto xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
    const int64_t H = x.size(-1), rows = x.numel() / H;
    auto out = at::empty(x.sizes(), xc.options());  // [..., H]
    auto mean = at::empty({rows}, xc.options());    // [rows]
    auto rstd = at::empty({rows}, xc.options());    // [rows]
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "attnlab::layer_norm", [&] {
      NormForward<scalar_t> a{xc.const_data_ptr<scalar_t>(),
                              nullptr,
                              wc.const_data_ptr<scalar_t>(),
                              bc.const_data_ptr<scalar_t>(),
                              out.data_ptr<scalar_t>(),
                              mean.data_ptr<scalar_t>(),
                              rstd.data_ptr<scalar_t>(),
                              nullptr,
                              H,
                              static_cast<scalar_t>(eps),
                              Dropout{}};
      kernels::norm_forward_all(a, rows);
    });
    ctx->save_for_backward({xc, wc, mean, rstd});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto dout = grads[0].contiguous();  // [..., H]
    const int64_t H = x.size(-1), rows = x.numel() / H;
    const bool affine = ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
    auto dx = at::empty(x.sizes(), x.options());  // [..., H]
    Tensor dw = affine ? at::empty({H}, w.options()) : Tensor();
    Tensor db = affine ? at::empty({H}, w.options()) : Tensor();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "attnlab::layer_norm_backward", [&] {
      NormBackward<scalar_t> a{dout.const_data_ptr<scalar_t>(),
                               x.const_data_ptr<scalar_t>(),
                               nullptr,
                               nullptr,
                               w.const_data_ptr<scalar_t>(),
                               mean.const_data_ptr<scalar_t>(),
                               rstd.const_data_ptr<scalar_t>(),
                               dx.data_ptr<scalar_t>(),
                               nullptr,
                               nullptr,
                               rows,
                               H,
                               0,
                               Dropout{}};
      kernels::norm_backward_all(a, affine ? dw.data_ptr<scalar_t>() : nullptr,
                                 affine ? db.data_ptr<scalar_t>() : nullptr);
    });
    return {dx, dw, db, Tensor()};
  }
};

/// x + dropout(y) with a drawn mask as one autograd node. x, y [..., H].
struct AddDropout : torch::autograd::Function<AddDropout> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y, Dropout d, Tensor* keep_out) {
    const auto xc = x.contiguous(), yc = y.contiguous();
    auto out = at::empty(x.sizes(), xc.options());                    // [..., H]
    auto keep = at::empty(x.sizes(), xc.options().dtype(at::kBool));  // [..., H]
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "attnlab::add_dropout", [&] {
      kernels::add_dropout_forward_all(xc.const_data_ptr<scalar_t>(), yc.const_data_ptr<scalar_t>(), xc.numel(), d,
                                       keep.data_ptr<bool>(), out.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({keep});
    ctx->saved_data["keep_prob"] = d.keep_prob;
    if (keep_out != nullptr) *keep_out = keep;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto keep = ctx->get_saved_variables()[0];
    const auto dout = grads[0].contiguous();  // [..., H]
    Tensor dy;
    if (ctx->needs_input_grad(1)) {
      dy = at::empty(dout.sizes(), dout.options());
      AT_DISPATCH_FLOATING_TYPES(dout.scalar_type(), "attnlab::add_dropout_backward", [&] {
        kernels::add_dropout_backward_all(dout.const_data_ptr<scalar_t>(), keep.const_data_ptr<bool>(),
                                          ctx->saved_data["keep_prob"].toDouble(), dout.numel(),
                                          dy.data_ptr<scalar_t>());
      });
    }
    return {grads[0], dy, Tensor(), Tensor()};
  }
};

void check_p(double p) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
}

/// The keep mask torch::dropout's p == 1 amounts to: nothing kept.
void set_none_kept(const Tensor& y, Tensor* keep) {
  if (keep != nullptr) *keep = at::zeros(y.sizes(), y.options().dtype(at::kBool));
}

}  // namespace

bool supported(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias) {
  if (!x.defined() || !y.defined() || x.dim() < 1 || x.size(-1) < 1) return false;
  const auto dtype = x.scalar_type();
  if (!x.device().is_cpu() || x.layout() != at::kStrided || (dtype != at::kFloat && dtype != at::kDouble)) return false;
  if (!y.device().is_cpu() || y.layout() != at::kStrided || y.scalar_type() != dtype || y.sizes() != x.sizes()) {
    return false;
  }
  for (const auto* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    if (!p->device().is_cpu() || p->layout() != at::kStrided || p->scalar_type() != dtype || p->dim() != 1 ||
        p->size(0) != x.size(-1)) {
      return false;
    }
  }
  return true;
}

Tensor add_dropout_layer_norm(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias, double p,
                              bool training, double eps, Tensor* keep) {
  check_p(p);
  if (keep != nullptr) *keep = Tensor();
  // Eval (dropout is the identity), p == 1 (torch's dropout draws nothing then) and what the kernels
  // do not take: the composition of torch ops.
  if (!training || p == 1.0 || !weight.defined() || !bias.defined() || !supported(x, y, weight, bias)) {
    if (training && p == 1.0) set_none_kept(y, keep);
    return torch::layer_norm(torch::dropout(y, p, training) + x, {x.size(-1)}, weight, bias, eps);
  }
  return AddDropoutLayerNorm::apply(x, y, weight, bias, draw_dropout(p), eps, keep);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (composed_only() || !weight.defined() || !bias.defined() || !supported(x, x, weight, bias) || x.numel() == 0) {
    return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  }
  return LayerNorm::apply(x, weight, bias, eps);
}

Tensor add_dropout(const Tensor& x, const Tensor& y, double p, bool training, Tensor* keep) {
  check_p(p);
  if (keep != nullptr) *keep = Tensor();
  if (!training || p == 0.0) return x + y;
  if (p == 1.0 || !supported(x, y)) {
    if (p == 1.0) set_none_kept(y, keep);
    return x + torch::dropout(y, p, true);
  }
  return AddDropout::apply(x, y, draw_dropout(p), keep);
}

}  // namespace attnlab::nn::fused

namespace attnlab::nn::fused::kernels {

// Each call advances the generator by the same amount, whatever the tensor's size and the thread
// count.
Dropout draw_dropout(double p) {
  Dropout d;
  if (p <= 0.0 || p >= 1.0) return d;
  d.active = true;
  d.keep_prob = 1.0 - p;
  d.threshold = static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0));
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  d.seed = gen.get<at::CPUGeneratorImpl>()->random64();
  return d;
}

}  // namespace attnlab::nn::fused::kernels
