// The additive kernels at the build's baseline ISA, the run-time choice between them and the AVX2
// copy, their split over ATen's threads, and the autograd node around them. Compiled with -fopenmp
// and without the PCH (CMakeLists.txt), as ATen's kernels are: at::parallel_for forks only in code
// built with OpenMP.
#define ATTNLAB_ADDITIVE_ISA baseline
#include "additive_kernels_rows.hpp"

#include <ATen/Parallel.h>
#if defined(ATTNLAB_ADDITIVE_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "additive_cuda.hpp"
#endif
#include <ATen/Version.h>
#include <torch/autograd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::scorers::additive {
namespace kernels {
namespace {

std::atomic<Isa> g_isa{Isa::Auto};

#if defined(ATTNLAB_ADDITIVE_AVX2)
bool cpu_runs_avx2() {
  static const bool yes = [] {
    const std::string capability = at::get_cpu_capability();  // ATEN_CPU_CAPABILITY=default turns it off
    return capability == "AVX2" || capability.starts_with("AVX512");
  }();
  return yes;
}

bool use_avx2() { return g_isa.load(std::memory_order_relaxed) != Isa::Baseline && cpu_runs_avx2(); }
#endif

}  // namespace

void set_isa(Isa isa) { g_isa.store(isa, std::memory_order_relaxed); }

bool avx2_available() {
#if defined(ATTNLAB_ADDITIVE_AVX2)
  return cpu_runs_avx2();
#else
  return false;
#endif
}

}  // namespace kernels

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

#if defined(ATTNLAB_ADDITIVE_AVX2)
#define ATTNLAB_ADDITIVE_CALL(kernel, ...) \
  (kernels::use_avx2() ? kernels::avx2::kernel(__VA_ARGS__) : kernels::baseline::kernel(__VA_ARGS__))
#else
#define ATTNLAB_ADDITIVE_CALL(kernel, ...) kernels::baseline::kernel(__VA_ARGS__)
#endif

// Elements (tanh evaluations) per at::parallel_for task: a hand-off to another thread costs
// microseconds, so Bahdanau's decoder step ([64, 1, 10, 32]: 20480) stays on the calling thread.
constexpr int64_t kGrain = 32768;

int64_t grain(int64_t per_item) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, per_item)); }

template <class T>
kernels::Operands<T> operands(const Tensor& q, const Tensor& k, const Tensor& w) {
  return {q.data_ptr<T>(), k.data_ptr<T>(), w.data_ptr<T>(), q.size(1), k.size(1), q.size(2)};
}

#if defined(ATTNLAB_ADDITIVE_CUDA)
Tensor forward_cuda(const Tensor& q, const Tensor& k, const Tensor& w) {
  const c10::cuda::CUDAGuard guard(q.device());
  auto scores = torch::empty({q.size(0), q.size(1), k.size(1)}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_scores_cuda", [&] {
    cuda::scores<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                           scores.data_ptr<scalar_t>(), q.size(0), q.size(1), k.size(1), q.size(2),
                           c10::cuda::getCurrentCUDAStream().stream());
  });
  return scores;
}

variable_list backward_cuda(const Tensor& q, const Tensor& k, const Tensor& w, const Tensor& dscores) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), Q = q.size(1), K = k.size(1), H = q.size(2);
  auto dq = torch::empty_like(q), dk = torch::empty_like(k);
  auto partial = torch::zeros({cuda::dw_partial_rows(B, Q), H}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_scores_backward_cuda", [&] {
    cuda::scores_backward<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                    dscores.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
                                    partial.data_ptr<scalar_t>(), B, Q, K, H,
                                    c10::cuda::getCurrentCUDAStream().stream());
  });
  if (Q == 0) dq.zero_();
  if (K == 0 || Q == 0) dk.zero_();
  return {dq, dk, partial.sum(0).view(w.sizes())};
}
#endif

Tensor forward_all(const Tensor& q, const Tensor& k, const Tensor& w) {
#if defined(ATTNLAB_ADDITIVE_CUDA)
  if (q.is_cuda()) return forward_cuda(q, k, w);
#endif
  auto scores = torch::zeros({q.size(0), q.size(1), k.size(1)}, q.options());
  if (scores.numel() == 0 || q.size(2) == 0) return scores;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_scores", [&] {
    const auto a = operands<scalar_t>(q, k, w);
    scalar_t* out = scores.data_ptr<scalar_t>();
    at::parallel_for(0, q.size(0) * a.Q, grain(a.K * a.H),
                     [&](int64_t r0, int64_t r1) { ATTNLAB_ADDITIVE_CALL(forward_rows, a, out, r0, r1); });
  });
  return scores;
}

variable_list backward_all(const Tensor& q, const Tensor& k, const Tensor& w, const Tensor& dscores) {
#if defined(ATTNLAB_ADDITIVE_CUDA)
  if (q.is_cuda()) return backward_cuda(q, k, w, dscores);
#endif
  auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dw = torch::zeros_like(w);
  const int64_t B = q.size(0), H = q.size(2);
  if (dscores.numel() == 0 || H == 0) return {dq, dk, dw};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_scores_backward", [&] {
    const auto a = operands<scalar_t>(q, k, w);
    std::vector<scalar_t> partial(static_cast<size_t>(B * H), scalar_t(0));  // [B, H]: each batch row's dw
    const scalar_t* ds = dscores.data_ptr<scalar_t>();
    scalar_t* pdq = dq.data_ptr<scalar_t>();
    scalar_t* pdk = dk.data_ptr<scalar_t>();
    at::parallel_for(0, B, grain(a.Q * a.K * H), [&](int64_t b0, int64_t b1) {
      ATTNLAB_ADDITIVE_CALL(backward_batches, a, ds, pdq, pdk, partial.data(), b0, b1);
    });
    scalar_t* pdw = dw.data_ptr<scalar_t>();
    for (int64_t b = 0; b < B; ++b) {  // in order: the same sum whatever the thread count
      for (int64_t h = 0; h < H; ++h) pdw[h] += partial[b * H + h];
    }
  });
  return {dq, dk, dw};
}

struct ScoresFunction : torch::autograd::Function<ScoresFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& w) {
    const auto qc = q.contiguous(), kc = k.contiguous(), wc = w.contiguous();
    ctx->save_for_backward({qc, kc, wc});
    return forward_all(qc, kc, wc);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto d = backward_all(saved[0], saved[1], saved[2], grads[0].contiguous());
    return {d[0], d[1], d[2]};
  }
};

/// Row r = b * Q + q's valid length, as a double (d2l compares arange(K) < valid_len in the
/// lengths' own type; float lengths work too), or +inf without lengths.
std::vector<double> row_lengths(const Tensor& lens, int64_t B, int64_t Q) {
  std::vector<double> out(static_cast<size_t>(B * Q), std::numeric_limits<double>::infinity());
  if (!lens.defined()) return out;
  const auto c = lens.contiguous();
  AT_DISPATCH_ALL_TYPES(c.scalar_type(), "additive_attend_lengths", [&] {
    const scalar_t* l = c.const_data_ptr<scalar_t>();
    for (int64_t r = 0; r < B * Q; ++r) out[r] = static_cast<double>(c.dim() == 1 ? l[r / Q] : l[r]);
  });
  return out;
}

/// Scores, d2l's masked softmax (-1e6 where key k >= the row's length), dropout (times noise)
/// and pooling of the values, one autograd node: q [B, Q, H], k [B, K, H], w [H] values [B, K, Dv],
/// lens as row_lengths reads them, noise [B, Q, K] or undefined -> [B, Q, Dv].
struct AttendFunction : torch::autograd::Function<AttendFunction> {
  // lens and noise as optionals: Function::apply takes no undefined tensor.
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& w, const Tensor& v,
                        const std::optional<Tensor>& lens_arg, const std::optional<Tensor>& noise_arg) {
    const Tensor lens = lens_arg.value_or(Tensor()), noise = noise_arg.value_or(Tensor());
    const auto qc = q.contiguous(), kc = k.contiguous(), wc = w.contiguous(), vc = v.contiguous();
    const auto nc = noise.defined() ? noise.contiguous() : noise;
    const int64_t B = q.size(0), Q = q.size(1), K = k.size(1), H = q.size(2), Dv = v.size(2);
    const auto lengths = row_lengths(lens, B, Q);
    auto p = at::empty({B, Q, K}, q.options());  // the softmax weights, before dropout
    auto out = at::empty({B, Q, Dv}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_attend", [&] {
      const auto a = operands<scalar_t>(qc, kc, wc);
      scalar_t* pp = p.mutable_data_ptr<scalar_t>();
      scalar_t* po = out.mutable_data_ptr<scalar_t>();
      const scalar_t* pv = vc.const_data_ptr<scalar_t>();
      const scalar_t* pn = nc.defined() ? nc.const_data_ptr<scalar_t>() : nullptr;
      at::parallel_for(0, B * Q, grain(K * (H + Dv)), [&](int64_t r0, int64_t r1) {
        ATTNLAB_ADDITIVE_CALL(forward_rows, a, pp, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
          scalar_t* s = pp + r * K;
          scalar_t top = -std::numeric_limits<scalar_t>::infinity();
          for (int64_t j = 0; j < K; ++j) {
            if (static_cast<double>(j) >= lengths[r]) s[j] = scalar_t(-1e6);  // d2l's fill
            top = std::max(top, s[j]);
          }
          scalar_t sum = 0;
          for (int64_t j = 0; j < K; ++j) sum += (s[j] = std::exp(s[j] - top));
          for (int64_t j = 0; j < K; ++j) s[j] /= sum;
          scalar_t* o = po + r * Dv;
          std::fill(o, o + Dv, scalar_t(0));
          const scalar_t* vb = pv + (r / Q) * K * Dv;
          for (int64_t j = 0; j < K; ++j) {
            const scalar_t weight = pn ? s[j] * pn[r * K + j] : s[j];
            for (int64_t d = 0; d < Dv; ++d) o[d] += weight * vb[j * Dv + d];
          }
        }
      });
    });
    ctx->save_for_backward({qc, kc, wc, vc, p});
    ctx->saved_data["noise"] = nc;
    ctx->saved_data["lens"] = lens;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &w = saved[2], &v = saved[3], &p = saved[4];
    const auto noise = ctx->saved_data["noise"].toOptional<Tensor>().value_or(Tensor());
    const int64_t B = q.size(0), Q = q.size(1), K = k.size(1), Dv = v.size(2);
    const auto lengths = row_lengths(ctx->saved_data["lens"].toOptional<Tensor>().value_or(Tensor()), B, Q);
    const auto dout = grads[0].contiguous();
    auto ds = at::empty({B, Q, K}, q.options());  // the scores' gradient
    auto dv = at::zeros_like(v);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "additive_attend_backward", [&] {
      const scalar_t* pp = p.const_data_ptr<scalar_t>();
      const scalar_t* pn = noise.defined() ? noise.const_data_ptr<scalar_t>() : nullptr;
      const scalar_t* pv = v.const_data_ptr<scalar_t>();
      const scalar_t* pd = dout.const_data_ptr<scalar_t>();
      scalar_t* pds = ds.mutable_data_ptr<scalar_t>();
      scalar_t* pdv = dv.mutable_data_ptr<scalar_t>();
      // Batch rows apart: each writes its own dv [b].
      at::parallel_for(0, B, grain(Q * K * Dv), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const scalar_t* vb = pv + b * K * Dv;
          scalar_t* dvb = pdv + b * K * Dv;
          for (int64_t i = 0; i < Q; ++i) {
            const int64_t r = b * Q + i;
            const scalar_t* pr = pp + r * K;
            const scalar_t* dor = pd + r * Dv;
            scalar_t* dsr = pds + r * K;
            scalar_t dot = 0;  // Σ_j p_j dp_j
            for (int64_t j = 0; j < K; ++j) {
              const scalar_t keep = pn ? pn[r * K + j] : scalar_t(1);
              scalar_t g = 0;  // d(dropped weight j) = dout · v_j
              for (int64_t d = 0; d < Dv; ++d) {
                g += dor[d] * vb[j * Dv + d];
                dvb[j * Dv + d] += pr[j] * keep * dor[d];
              }
              dsr[j] = g * keep;  // dp_j
              dot += pr[j] * dsr[j];
            }
            // The softmax's backward; the masked scores get none (masked_fill's backward).
            for (int64_t j = 0; j < K; ++j) {
              dsr[j] = static_cast<double>(j) >= lengths[r] ? scalar_t(0) : pr[j] * (dsr[j] - dot);
            }
          }
        }
      });
    });
    auto d = backward_all(q, k, w, ds);
    return {d[0], d[1], d[2], dv, Tensor(), Tensor()};
  }
};

}  // namespace

bool fused_scores_supported(const Tensor& q, const Tensor& k, const Tensor& w) {
  const auto dtype = q.scalar_type();
  const bool cpu = q.device().is_cpu() && k.device().is_cpu() && w.device().is_cpu();
  const bool one_gpu = q.is_cuda() && k.device() == q.device() && w.device() == q.device();
  if (!cpu && !(one_gpu && cuda_built())) return false;
  // On CUDA, bf16/half projections (autocast) are scored in float: the node takes float copies.
  const bool low = one_gpu && (dtype == torch::kBFloat16 || dtype == torch::kHalf);
  return (dtype == torch::kFloat || dtype == torch::kDouble || low) && k.scalar_type() == dtype &&
         (w.scalar_type() == dtype || (low && w.scalar_type() == torch::kFloat));
}

bool cuda_built() {
#if defined(ATTNLAB_ADDITIVE_CUDA)
  return true;
#else
  return false;
#endif
}

Tensor fused_attend(const Tensor& q, const Tensor& k, const Tensor& w, const Tensor& values, const Tensor& valid_lens,
                    const Tensor& noise) {
  TORCH_CHECK(fused_attend_supported(q, k, w, values, valid_lens),
              "additive fused_attend: needs float or double CPU tensors of one dtype, q [B, Q, H], k [B, K, H], w of H "
              "elements, values [B, K, Dv], none empty, and CPU lengths [B] or [B, Q]; found queries ",
              q.toString(), " ", q.sizes(), ", keys ", k.toString(), " ", k.sizes(), ", values ", values.toString(),
              " ", values.sizes());
  TORCH_CHECK(!noise.defined() || (noise.sizes() == at::IntArrayRef({q.size(0), q.size(1), k.size(1)}) &&
                                   noise.scalar_type() == q.scalar_type() && noise.device().is_cpu()),
              "additive fused_attend: the dropout noise must be [B, Q, K] like the scores, found ", noise.sizes());
  auto given = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return AttendFunction::apply(q, k, w, values, given(valid_lens), given(noise));
}

bool fused_attend_takes(int64_t B, int64_t Q, int64_t K, at::ScalarType dtype, const Tensor& values,
                        const Tensor& valid_lens) {
  if (B == 0 || Q == 0 || K == 0 || values.dim() != 3 || values.size(0) != B || values.size(1) != K ||
      values.size(2) == 0 || values.scalar_type() != dtype || !values.device().is_cpu()) {
    return false;
  }
  if (!valid_lens.defined()) return true;
  const auto lens = valid_lens.scalar_type();
  return valid_lens.device().is_cpu() &&
         (at::isIntegralType(lens, /*includeBool=*/false) || lens == at::kFloat || lens == at::kDouble) &&
         ((valid_lens.dim() == 1 && valid_lens.size(0) == B) ||
          (valid_lens.dim() == 2 && valid_lens.size(0) == B && valid_lens.size(1) == Q));
}

bool fused_attend_supported(const Tensor& q, const Tensor& k, const Tensor& w, const Tensor& values,
                            const Tensor& valid_lens) {
  return q.device().is_cpu() && fused_scores_supported(q, k, w) && q.dim() == 3 && k.dim() == 3 &&
         q.size(0) == k.size(0) && q.size(2) == k.size(2) && w.numel() == q.size(2) && q.size(2) > 0 &&
         fused_attend_takes(q.size(0), q.size(1), k.size(1), q.scalar_type(), values, valid_lens);
}

Tensor fused_scores(const Tensor& q, const Tensor& k, const Tensor& w) {
  TORCH_CHECK(fused_scores_supported(q, k, w),
              "additive fused_scores: needs float or double tensors of one dtype on the CPU or one GPU, found queries ",
              q.toString(), ", keys ", k.toString(), ", w ", w.toString());
  TORCH_CHECK(
      q.dim() == 3 && k.dim() == 3 && q.size(0) == k.size(0) && q.size(2) == k.size(2) && w.numel() == q.size(2),
      "additive fused_scores: needs q [B, Q, H], k [B, K, H], w of H elements, found ", q.sizes(), ", ", k.sizes(),
      ", ", w.sizes());
  if (q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf) {
    return ScoresFunction::apply(q.to(torch::kFloat), k.to(torch::kFloat), w.to(torch::kFloat));
  }
  return ScoresFunction::apply(q, k, w);
}

}  // namespace attnlab::scorers::additive
