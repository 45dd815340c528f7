// The fused attention core on the CPU (nn/fused_attention.hpp).
#include "nn/fused_attention.hpp"

#include "nn/fused_kernels.hpp"
#include "nn/fused_linear.hpp"
#include "nn/mask_memo.hpp"

#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <optional>
#include <vector>

namespace attnlab::nn::fused {
namespace {

using kernels::Dropout;
using kernels::SoftmaxBackward;
using kernels::SoftmaxForward;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local bool t_composed_only = false;

/// The keys each of the B * Q rows attends to: how many positions j < valid_len there are among
/// 0..K-1 (ceil(valid_len) for a float length), int64 [B * Q]. Once per lengths tensor and shape in
/// a step (nn/mask_memo.hpp). A NaN length has no valid key (j < NaN is false), +inf all of them.
Tensor valid_counts(const Tensor& valid_lens, int64_t B, int64_t Q, int64_t K) {
  return memo::derived(valid_lens, {memo::kValidCounts, B, Q, K}, [&] {
    auto lens = valid_lens.dim() == 1 ? valid_lens.unsqueeze(1).expand({B, Q}) : valid_lens.reshape({B, Q});
    if (lens.is_floating_point()) lens = lens.ceil().nan_to_num(0.0, static_cast<double>(K), 0.0);
    return std::vector<Tensor>{lens.clamp(0, K).to(at::kLong).contiguous().view({B * Q})};
  })[0];
}

/// a @ b over the batch: a [B, M, P] (read transposed when `ta`: stored [B, P, M]), b [B, P, N]
/// (`tb`: stored [B, N, P]) -> [B, M, N] contiguous. Up to kLoopMacs multiply-adds as plain loops
/// over the strides (no transpose view, no bmm dispatch, which at the corners' sizes, [48, 3, 2], each
/// cost more than the arithmetic), at::bmm above.
Tensor product(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const int64_t B = a.size(0), M = a.size(ta ? 2 : 1), P = a.size(ta ? 1 : 2), N = b.size(tb ? 1 : 2);
  if (B * M * N * P > kLoopMacs) return at::bmm(ta ? a.transpose(1, 2) : a, tb ? b.transpose(1, 2) : b);
  auto c = at::empty({B, M, N}, a.options());
  const int64_t sa0 = a.stride(0), sam = a.stride(ta ? 2 : 1), sap = a.stride(ta ? 1 : 2);
  const int64_t sb0 = b.stride(0), sbp = b.stride(tb ? 2 : 1), sbn = b.stride(tb ? 1 : 2);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "attnlab::fused_attention_product", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* pc = c.data_ptr<scalar_t>();
    for (int64_t n = 0; n < B; ++n) {
      for (int64_t i = 0; i < M; ++i) {
        const scalar_t* ar = pa + n * sa0 + i * sam;
        for (int64_t j = 0; j < N; ++j) {
          const scalar_t* bc = pb + n * sb0 + j * sbn;
          scalar_t acc = 0;
          for (int64_t p = 0; p < P; ++p) acc += ar[p * sap] * bc[p * sbp];
          *pc++ = acc;
        }
      }
    }
  });
  return c;
}

/// The valid counts, not a tensor argument of the autograd function (those must be defined).
struct Counts {
  Tensor rows;  // int64 [B * Q], or undefined: every key valid
};

/// dropout(masked_softmax(q k^T * scale + bias)) @ v as one autograd node; bias, when given, is
/// [B, Q, K] contiguous in q's dtype. Saves q, k, v, the weights before and after dropout
/// [B, Q, K], the mask and the counts.
struct Attention : torch::autograd::Function<Attention> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const std::optional<Tensor>& bias, const Counts& valid, Dropout d, double scale,
                        Tensor* keep_out) {
    const int64_t B = q.size(0), Q = q.size(1), K = k.size(1);
    const Tensor& counts = valid.rows;
    auto probs = product(q, false, k, true);     // [B, Q, K]: the scores, then (in place) the weights
    Tensor keep, dropped;                        // [B, Q, K] each, when a mask is drawn
    if (d.active) {
      keep = at::empty({B, Q, K}, probs.options().dtype(at::kBool));
      dropped = at::empty({B, Q, K}, probs.options());
    }
    AT_DISPATCH_FLOATING_TYPES(probs.scalar_type(), "attnlab::fused_attention", [&] {
      SoftmaxForward<scalar_t> a{probs.const_data_ptr<scalar_t>(),
                                 bias ? bias->const_data_ptr<scalar_t>() : nullptr,
                                 probs.data_ptr<scalar_t>(),
                                 d.active ? dropped.data_ptr<scalar_t>() : nullptr,
                                 d.active ? keep.data_ptr<bool>() : nullptr,
                                 counts.defined() ? counts.const_data_ptr<int64_t>() : nullptr,
                                 K,
                                 static_cast<scalar_t>(scale),
                                 d};
      kernels::softmax_forward_all(a, B * Q);
    });
    const Tensor& weights = d.active ? dropped : probs;
    ctx->save_for_backward({q, k, v, probs, dropped, keep});
    if (counts.defined()) ctx->saved_data["counts"] = counts;
    ctx->saved_data["bias"] = bias.has_value();
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["keep_prob"] = d.keep_prob;
    if (keep_out != nullptr) *keep_out = keep;
    return product(weights, false, v, false);  // [B, Q, Dv]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3], &dropped = saved[4],
                 &keep = saved[5];
    const Tensor counts = ctx->saved_data.count("counts") != 0 ? ctx->saved_data["counts"].toTensor() : Tensor();
    const Tensor& dout = grads[0];  // [B, Q, Dv]
    const Tensor& weights = keep.defined() ? dropped : probs;
    // The bias, when given, is the fourth input with an edge.
    const bool bias_grad = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(3);
    Tensor dq, dk, dv, dbias;
    if (ctx->needs_input_grad(2)) dv = product(weights, true, dout, false);  // [B, K, Dv]
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || bias_grad) {
      if (bias_grad) dbias = at::empty(probs.sizes(), probs.options());  // [B, Q, K]
      auto dscores = product(dout, false, v, true);  // [B, Q, K]: d weights, then (in place) d scores
      Dropout d;
      d.active = keep.defined();
      d.keep_prob = ctx->saved_data["keep_prob"].toDouble();
      AT_DISPATCH_FLOATING_TYPES(dscores.scalar_type(), "attnlab::fused_attention_backward", [&] {
        SoftmaxBackward<scalar_t> a{dscores.const_data_ptr<scalar_t>(),
                                    probs.const_data_ptr<scalar_t>(),
                                    d.active ? keep.const_data_ptr<bool>() : nullptr,
                                    counts.defined() ? counts.const_data_ptr<int64_t>() : nullptr,
                                    dscores.data_ptr<scalar_t>(),
                                    bias_grad ? dbias.data_ptr<scalar_t>() : nullptr,
                                    probs.size(2),
                                    static_cast<scalar_t>(ctx->saved_data["scale"].toDouble()),
                                    d};
        kernels::softmax_backward_all(a, probs.size(0) * probs.size(1));
      });
      if (ctx->needs_input_grad(0)) dq = product(dscores, false, k, false);  // [B, Q, D]
      if (ctx->needs_input_grad(1)) dk = product(dscores, true, q, false);   // [B, K, D]
    }
    return {dq, dk, dv, dbias, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

bool cpu_strided(const Tensor& t) { return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided; }

}  // namespace

bool attention_supported(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens,
                         const Tensor& bias) {
  if (t_composed_only || !cpu_strided(queries) || !cpu_strided(keys) || !cpu_strided(values)) return false;
  const auto dtype = queries.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kDouble) || keys.scalar_type() != dtype || values.scalar_type() != dtype) {
    return false;
  }
  if (queries.dim() != 3 || keys.dim() != 3 || values.dim() != 3) return false;
  const int64_t B = queries.size(0), Q = queries.size(1);
  if (keys.size(0) != B || values.size(0) != B || keys.size(2) != queries.size(2) || values.size(1) != keys.size(1) ||
      keys.size(1) < 1) {
    return false;
  }
  if (bias.defined()) {
    if (!cpu_strided(bias) || !bias.is_floating_point() || bias.dim() > 3) return false;
    const int64_t target[3] = {B, Q, keys.size(1)};
    for (int64_t i = 0; i < bias.dim(); ++i) {  // the trailing dimensions, as broadcasting aligns them
      const int64_t have = bias.size(bias.dim() - 1 - i), want = target[2 - i];
      if (have != 1 && have != want) return false;
    }
  }
  if (!valid_lens.defined()) return true;
  if (!cpu_strided(valid_lens) || valid_lens.scalar_type() == at::kBool ||
      !(valid_lens.is_floating_point() || at::isIntegralType(valid_lens.scalar_type(), /*includeBool=*/false))) {
    return false;
  }
  return (valid_lens.dim() == 1 && valid_lens.size(0) == B) || (valid_lens.dim() == 2 && valid_lens.numel() == B * Q);
}

Tensor attention(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens,
                 const Tensor& bias, double p, double scale, Tensor* keep) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "fused attention: dropout must be in [0, 1), found ", p);
  TORCH_CHECK(attention_supported(queries, keys, values, valid_lens, bias),
              "fused attention: expected CPU float or double queries [B, Q, D], keys [B, K, D], values [B, K, Dv], "
              "valid_lens [B] or [B, Q] and a bias that broadcasts to [B, Q, K], found ",
              queries.sizes(), ", ", keys.sizes(), ", ", values.sizes(), ", ",
              valid_lens.defined() ? valid_lens.sizes() : at::IntArrayRef{}, ", ",
              bias.defined() ? bias.sizes() : at::IntArrayRef{});
  if (keep != nullptr) *keep = Tensor();
  Counts counts;
  if (valid_lens.defined()) counts.rows = valid_counts(valid_lens, queries.size(0), queries.size(1), keys.size(1));
  std::optional<Tensor> full_bias;  // [B, Q, K]: broadcast here, so autograd sums its gradient back
  if (bias.defined()) {
    full_bias = bias.to(queries.scalar_type()).expand({queries.size(0), queries.size(1), keys.size(1)}).contiguous();
  }
  return Attention::apply(queries, keys, values, full_bias, counts, kernels::draw_dropout(p), scale, keep);
}

ComposedOnly::ComposedOnly(bool on) : previous_(t_composed_only) { t_composed_only = previous_ || on; }
ComposedOnly::~ComposedOnly() { t_composed_only = previous_; }
bool composed_only() { return t_composed_only; }

}  // namespace attnlab::nn::fused
