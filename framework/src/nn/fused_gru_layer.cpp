// One GRU layer over a whole sequence as one autograd node: the GEMMs around the fused gate
// kernels (fused_gru_gates.hpp), forward and hand-written backward.
#include <attnlab/nn/fused_gru.hpp>

#include "nn/blas.hpp"
#include "nn/fused_gru_gates.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <algorithm>

namespace attnlab::nn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Step t's rows in a [B, T, C] (batch_first) or [T, B, C] matrix: first row and leading dimension.
struct StepRows {
  int64_t step_offset;  // elements from step t to step t + 1
  int64_t ld;           // elements from row b to row b + 1
};
StepRows step_rows(bool batch_first, int64_t steps, int64_t batch, int64_t columns) {
  return batch_first ? StepRows{columns, steps * columns} : StepRows{batch * columns, columns};
}

class FusedGruLayerFunction : public torch::autograd::Function<FusedGruLayerFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                               const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool batch_first,
                               bool keep) {
    // keep: whether this call records a node (Function::apply runs forward in no-grad mode).
    const int64_t steps = x.size(batch_first ? 1 : 0), batch = x.size(batch_first ? 0 : 1);
    const int64_t in = x.size(2), H = w_hh.size(1);
    const auto xc = x.contiguous(), h0c = h0.contiguous();
    const auto wi = w_ih.contiguous(), wh = w_hh.contiguous(), bi = b_ih.contiguous(), bh = b_hh.contiguous();
    // Every step's input projection in one GEMM, rows in x's order.
    auto gi = at::empty({steps * batch, 3 * H}, x.options());  // [B·T or T·B, 3H]
    // hs[0] = h0, hs[t + 1] = step t's output: the outputs and, for the backward, every step's
    // previous state in one matrix.
    auto hs = at::empty({steps + 1, batch, H}, x.options());  // [T + 1, B, H]
    auto gh = at::empty({batch, 3 * H}, x.options());         // [B, 3H]
    auto saved = keep ? at::empty({steps, batch, 4 * H}, x.options()) : Tensor();  // [T, B, 4H]
    const auto gi_rows = step_rows(batch_first, steps, batch, 3 * H);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_gru_layer", [&] {
      scalar_t* pgi = gi.mutable_data_ptr<scalar_t>();
      blas::fill_rows(pgi, bi.const_data_ptr<scalar_t>(), steps * batch, 3 * H);
      blas::gemm<scalar_t>(false, true, steps * batch, 3 * H, in, 1, xc.const_data_ptr<scalar_t>(), in,
                           wi.const_data_ptr<scalar_t>(), in, 1, pgi, 3 * H);
      scalar_t* phs = hs.mutable_data_ptr<scalar_t>();
      std::copy_n(h0c.const_data_ptr<scalar_t>(), batch * H, phs);
      scalar_t* pgh = gh.mutable_data_ptr<scalar_t>();
      fused_gru::GatesForward<scalar_t> s;
      s.batch = batch;
      s.hidden = H;
      s.ld_gi = gi_rows.ld;
      s.gh = pgh;
      s.ld_h = s.ld_h_next = H;
      for (int64_t t = 0; t < steps; ++t) {
        blas::fill_rows(pgh, bh.const_data_ptr<scalar_t>(), batch, 3 * H);
        blas::gemm<scalar_t>(false, true, batch, 3 * H, H, 1, phs + t * batch * H, H, wh.const_data_ptr<scalar_t>(), H,
                             1, pgh, 3 * H);
        s.gi = pgi + t * gi_rows.step_offset;
        s.h = phs + t * batch * H;
        s.h_next = phs + (t + 1) * batch * H;
        s.saved = keep ? saved.mutable_data_ptr<scalar_t>() + t * batch * 4 * H : nullptr;
        fused_gru::gates_forward(s);
      }
    });
    if (keep) {
      ctx->save_for_backward({xc, wi, wh});
      ctx->saved_data["hs"] = hs;
      ctx->saved_data["gates"] = saved;
      ctx->saved_data["batch_first"] = batch_first;
      // An unused output's gradient stays undefined instead of a tensor of zeros.
      ctx->set_materialize_grads(false);
    }
    return {hs.narrow(0, 1, steps), hs.select(0, steps).clone()};  // [T, B, H], [B, H]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "FusedGru: its backward is not differentiable (no double backward, create_graph); use fused: false");
    const auto vars = ctx->get_saved_variables();
    const auto &x = vars[0], &w_ih = vars[1], &w_hh = vars[2];
    const auto hs = ctx->saved_data["hs"].toTensor();        // [T + 1, B, H]
    const auto saved = ctx->saved_data["gates"].toTensor();  // [T, B, 4H]
    const bool batch_first = ctx->saved_data["batch_first"].toBool();
    const int64_t steps = saved.size(0), batch = saved.size(1), H = hs.size(2), in = x.size(2);
    auto dy = grads[0];  // [T, B, H] or undefined
    if (dy.defined() && dy.stride(2) != 1) dy = dy.contiguous();
    // Gradient of the state carried back through the steps; starts as h_T's.
    auto dh = grads[1].defined() ? grads[1].contiguous().clone() : at::zeros({batch, H}, hs.options());  // [B, H]
    auto dgi = batch_first ? at::empty({batch, steps, 3 * H}, hs.options())
                           : at::empty({steps, batch, 3 * H}, hs.options());  // as x W_ihᵀ + b_ih
    auto dgh = at::empty({steps, batch, 3 * H}, hs.options());                // [T, B, 3H]
    const bool need_dh0 = ctx->needs_input_grad(1);
    const auto gi_rows = step_rows(batch_first, steps, batch, 3 * H);
    Tensor dx, dh0, dw_ih, dw_hh, db_ih, db_hh;
    if (ctx->needs_input_grad(0)) dx = at::empty(x.sizes(), x.options());
    if (ctx->needs_input_grad(2)) dw_ih = at::empty({3 * H, in}, x.options());
    if (ctx->needs_input_grad(3)) dw_hh = at::empty({3 * H, H}, x.options());
    if (ctx->needs_input_grad(4)) db_ih = at::empty({3 * H}, x.options());
    if (ctx->needs_input_grad(5)) db_hh = at::empty({3 * H}, x.options());
    AT_DISPATCH_FLOATING_TYPES(hs.scalar_type(), "fused_gru_layer_backward", [&] {
      const scalar_t* phs = hs.const_data_ptr<scalar_t>();
      scalar_t* pdgi = dgi.mutable_data_ptr<scalar_t>();
      scalar_t* pdgh = dgh.mutable_data_ptr<scalar_t>();
      const scalar_t* pw_hh = w_hh.const_data_ptr<scalar_t>();
      fused_gru::GatesBackward<scalar_t> s;
      s.batch = batch;
      s.hidden = H;
      s.ld_dy = dy.defined() ? dy.stride(1) : 0;
      s.dh = dh.mutable_data_ptr<scalar_t>();
      s.ld_h = H;
      s.ld_dgi = gi_rows.ld;
      for (int64_t t = steps - 1; t >= 0; --t) {
        s.dy = dy.defined() ? dy.const_data_ptr<scalar_t>() + t * dy.stride(0) : nullptr;
        s.h = phs + t * batch * H;
        s.saved = saved.const_data_ptr<scalar_t>() + t * batch * 4 * H;
        s.dgi = pdgi + t * gi_rows.step_offset;
        s.dgh = pdgh + t * batch * 3 * H;
        fused_gru::gates_backward(s);
        if (t > 0 || need_dh0) {  // dh += dgh[t] [B, 3H] · w_hh [3H, H]
          blas::gemm<scalar_t>(false, false, batch, H, 3 * H, 1, pdgh + t * batch * 3 * H, 3 * H, pw_hh, H, 1, s.dh, H);
        }
      }
      // The rest over all steps at once; dgi's rows are in x's order, dgh's [T·B, 3H].
      const int64_t rows = steps * batch;
      if (dx.defined()) {
        blas::gemm<scalar_t>(false, false, rows, in, 3 * H, 1, pdgi, 3 * H, w_ih.const_data_ptr<scalar_t>(), in, 0,
                             dx.mutable_data_ptr<scalar_t>(), in);
      }
      if (dw_ih.defined()) {
        blas::gemm<scalar_t>(true, false, 3 * H, in, rows, 1, pdgi, 3 * H, x.const_data_ptr<scalar_t>(), in, 0,
                             dw_ih.mutable_data_ptr<scalar_t>(), in);
      }
      if (dw_hh.defined()) {  // hs[0 .. T - 1]: every step's previous state
        blas::gemm<scalar_t>(true, false, 3 * H, H, rows, 1, pdgh, 3 * H, phs, H, 0, dw_hh.mutable_data_ptr<scalar_t>(),
                             H);
      }
      if (db_ih.defined()) blas::column_sums<scalar_t>(pdgi, rows, 3 * H, db_ih.mutable_data_ptr<scalar_t>());
      if (db_hh.defined()) blas::column_sums<scalar_t>(pdgh, rows, 3 * H, db_hh.mutable_data_ptr<scalar_t>());
    });
    if (need_dh0) dh0 = dh;
    return {dx, dh0, dw_ih, dw_hh, db_ih, db_hh, Tensor(), Tensor()};
  }
};

}  // namespace

std::tuple<Tensor, Tensor> fused_gru_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                                           const Tensor& b_ih, const Tensor& b_hh, bool batch_first) {
  TORCH_CHECK(x.dim() == 3 && x.numel() > 0 && x.device().is_cpu(),
              "fused_gru_layer: expected a non-empty CPU input [B, T, I] or [T, B, I], found ", x.sizes(), " on ",
              x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "fused_gru_layer: expected float or double, found ", x.scalar_type());
  const int64_t H = w_hh.size(1), batch = x.size(batch_first ? 0 : 1);
  TORCH_CHECK(w_ih.sizes() == at::IntArrayRef({3 * H, x.size(2)}) && w_hh.sizes() == at::IntArrayRef({3 * H, H}) &&
                  b_ih.sizes() == at::IntArrayRef({3 * H}) && b_hh.sizes() == at::IntArrayRef({3 * H}),
              "fused_gru_layer: expected weights [3H, I], [3H, H] and biases [3H] for I = ", x.size(2), ", H = ", H,
              ", found ", w_ih.sizes(), ", ", w_hh.sizes(), ", ", b_ih.sizes(), " and ", b_hh.sizes());
  TORCH_CHECK(h0.sizes() == at::IntArrayRef({batch, H}), "fused_gru_layer: expected h0 [", batch, ", ", H, "], found ",
              h0.sizes());
  for (const auto* t : {&h0, &w_ih, &w_hh, &b_ih, &b_hh}) {
    TORCH_CHECK(t->scalar_type() == x.scalar_type() && t->device().is_cpu(),
                "fused_gru_layer: every tensor must be a CPU ", x.scalar_type(), " as the input, found a ",
                t->scalar_type(), " on ", t->device());
  }
  const bool keep =
      at::GradMode::is_enabled() && (x.requires_grad() || h0.requires_grad() || w_ih.requires_grad() ||
                                     w_hh.requires_grad() || b_ih.requires_grad() || b_hh.requires_grad());
  auto out = FusedGruLayerFunction::apply(x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, keep);
  return {out[0], out[1]};
}

}  // namespace attnlab::nn
