// The linear layers as one autograd node on the CPU (nn/fused_linear.hpp).
#include "nn/fused_linear.hpp"

#include "nn/blas.hpp"
#include "nn/fused_attention.hpp"

#include <ATen/Dispatch.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace attnlab::nn::fused {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Where the rows of x and y lie. Row n = b * T + t of the product; with `heads` > 1, x may be
/// merged from heads ([B * heads, T, I / heads]: feature i of row (b, t) at head i / (I / heads))
/// and y split into heads ([B, heads, T, O / heads]); otherwise rows are contiguous.
struct Layout {
  int64_t T = 1, heads = 1;
  bool merged_in = false, split_out = false;

  /// The offset of element (n, f) of a [N, F] matrix stored split into heads.
  int64_t at(int64_t n, int64_t f, int64_t F) const {
    const int64_t d = F / heads, b = n / T, t = n % T;
    return ((b * heads + f / d) * T + t) * d + f % d;
  }
};

/// Row n of a [N, F] matrix into buf (when stored split into heads), or a pointer to it.
template <class T>
const T* row(const T* m, int64_t n, int64_t F, bool split, const Layout& L, T* buf) {
  if (!split) return m + n * F;
  const int64_t d = F / L.heads;
  for (int64_t h = 0; h < L.heads; ++h) std::copy_n(m + L.at(n, h * d, F), d, buf + h * d);
  return buf;
}

/// y [N, O] = x [N, I] w^T + b (b null: none).
template <class T>
void forward_loops(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t I, int64_t O, const Layout& L) {
  std::vector<T> xbuf(L.merged_in ? I : 0);
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = row(x, n, I, L.merged_in, L, xbuf.data());
    for (int64_t o = 0; o < O; ++o) {
      const T* wr = w + o * I;
      T acc = b != nullptr ? b[o] : T(0);
      for (int64_t i = 0; i < I; ++i) acc += xr[i] * wr[i];
      y[L.split_out ? L.at(n, o, O) : n * O + o] = acc;
    }
  }
}

/// From dy [N, O]: dx [N, I] = dy w, dw [O, I] = dy^T x, db [O] = the column sums of dy; a null
/// output is not computed.
template <class T>
void backward_loops(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db, int64_t N, int64_t I, int64_t O,
                    const Layout& L) {
  if (dw != nullptr) std::fill(dw, dw + O * I, T(0));
  if (db != nullptr) std::fill(db, db + O, T(0));
  std::vector<T> xbuf(L.merged_in ? I : 0), dybuf(L.split_out ? O : 0),
      dxbuf(L.merged_in && dx != nullptr ? I : 0);
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = dw != nullptr ? row(x, n, I, L.merged_in, L, xbuf.data()) : nullptr;
    const T* dyr = row(dy, n, O, L.split_out, L, dybuf.data());
    T* dxr = dx == nullptr ? nullptr : L.merged_in ? dxbuf.data() : dx + n * I;
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
    if (dx != nullptr && L.merged_in) {
      for (int64_t i = 0; i < I; ++i) dx[L.at(n, i, I)] = dxr[i];
    }
  }
}

/// The rows of a [N, F] matrix stored split into heads (Layout), gathered into `out` [N, F].
template <class T>
void gather_rows(const T* m, int64_t N, int64_t F, const Layout& L, T* out) {
  for (int64_t n = 0; n < N; ++n) row(m, n, F, true, L, out + n * F);
}

/// The reverse: rows [N, F] into a matrix stored split into heads.
template <class T>
void scatter_rows(const T* rows, int64_t N, int64_t F, const Layout& L, T* m) {
  const int64_t d = F / L.heads;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < L.heads; ++h) std::copy_n(rows + n * F + h * d, d, m + L.at(n, h * d, F));
  }
}

/// forward_loops' products as one BLAS GEMM (blas.hpp), the heads' layouts gathered and
/// scattered by plain copies around it.
template <class T>
void forward_blas(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t I, int64_t O, const Layout& L) {
  std::vector<T> xbuf(L.merged_in ? N * I : 0), ybuf(L.split_out ? N * O : 0);
  if (L.merged_in) gather_rows(x, N, I, L, xbuf.data());
  const T* x2 = L.merged_in ? xbuf.data() : x;
  T* y2 = L.split_out ? ybuf.data() : y;
  if (b != nullptr) blas::fill_rows(y2, b, N, O);
  blas::gemm<T>(false, true, N, O, I, T(1), x2, I, w, I, b != nullptr ? T(1) : T(0), y2, O);
  if (L.split_out) scatter_rows(y2, N, O, L, y);
}

/// backward_loops' products as BLAS GEMMs: dx = dy w, dw = dy^T x; db as its column sums.
template <class T>
void backward_blas(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db, int64_t N, int64_t I, int64_t O,
                   const Layout& L) {
  std::vector<T> dybuf(L.split_out ? N * O : 0), xbuf(L.merged_in && dw != nullptr ? N * I : 0),
      dxbuf(L.merged_in && dx != nullptr ? N * I : 0);
  if (L.split_out) gather_rows(dy, N, O, L, dybuf.data());
  const T* dy2 = L.split_out ? dybuf.data() : dy;
  if (dx != nullptr) {
    T* dx2 = L.merged_in ? dxbuf.data() : dx;
    blas::gemm<T>(false, false, N, I, O, T(1), dy2, O, w, I, T(0), dx2, I);
    if (L.merged_in) scatter_rows(dx2, N, I, L, dx);
  }
  if (dw != nullptr) {
    if (L.merged_in) gather_rows(x, N, I, L, xbuf.data());
    blas::gemm<T>(true, false, O, I, N, T(1), dy2, O, L.merged_in ? xbuf.data() : x, I, T(0), dw, I);
  }
  if (db != nullptr) blas::column_sums(dy2, N, O, db);
}

/// [B * heads, T, d] (or [B, heads, T, d]) -> the [B * T, heads * d] matrix it splits.
Tensor merge_heads(const Tensor& m, int64_t heads) {
  const int64_t T = m.size(-2), d = m.size(-1);
  return m.reshape({-1, heads, T, d}).permute({0, 2, 1, 3}).reshape({-1, heads * d});
}

/// [B * T, heads * d] -> [B, heads, T, d] contiguous.
Tensor split_heads(const Tensor& m, int64_t T, int64_t heads) {
  return m.view({-1, T, heads, m.size(1) / heads}).permute({0, 2, 1, 3}).contiguous();
}

/// y = x w^T + b in the layout `split`/`merged` say (see Layout); saves x (as given, contiguous),
/// w and the bias (only to say that there is one), and the layout.
struct Linear : torch::autograd::Function<Linear> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                        Layout L) {
    const auto xc = x.contiguous();
    const auto w = weight.contiguous();
    const int64_t I = w.size(1), O = w.size(0), N = xc.numel() / I;
    std::vector<int64_t> sizes;  // of y
    if (L.split_out) {
      sizes = {N / L.T, L.heads, L.T, O / L.heads};
    } else if (L.merged_in) {
      sizes = {N / L.T, L.T, O};
    } else {
      sizes = x.sizes().vec();
      sizes.back() = O;
    }
    auto y = at::empty(sizes, xc.options());
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "attnlab::fused_linear", [&] {
      const auto run = N * I * O <= kLoopMacs ? forward_loops<scalar_t> : forward_blas<scalar_t>;
      run(xc.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
          bias ? bias->const_data_ptr<scalar_t>() : nullptr, y.data_ptr<scalar_t>(), N, I, O, L);
    });
    if (bias) {
      ctx->save_for_backward({xc, w, *bias});
    } else {
      ctx->save_for_backward({xc, w});
    }
    if (L.merged_in || L.split_out) {
      ctx->saved_data["layout"] = std::vector<int64_t>{L.T, L.heads, L.merged_in, L.split_out};
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& w = saved[1];
    const bool has_bias = saved.size() == 3;
    Layout L;
    if (auto it = ctx->saved_data.find("layout"); it != ctx->saved_data.end()) {
      const auto v = it->second.toIntVector();
      L = {v[0], v[1], v[2] != 0, v[3] != 0};
    }
    const int64_t I = w.size(1), O = w.size(0), N = x.numel() / I;
    const auto dy = grads[0].contiguous();
    const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    const bool need_b = has_bias && ctx->needs_input_grad(2);
    Tensor dx, dw, db;
    if (torch::GradMode::is_enabled()) {
      // torch's differentiable ops for a double backward (create_graph).
      const auto dy2 = L.split_out ? merge_heads(dy, L.heads) : dy.view({N, O});
      if (need_x) {
        dx = dy2.mm(w);
        dx = L.merged_in ? split_heads(dx, L.T, L.heads).view(x.sizes()) : dx.view(x.sizes());
      }
      if (need_w) dw = dy2.t().mm(L.merged_in ? merge_heads(x, L.heads) : x.view({N, I}));
      if (need_b) db = dy2.sum(0);
    } else {
      if (need_x) dx = at::empty_like(x);
      if (need_w) dw = at::empty_like(w);
      if (need_b) db = at::empty({O}, w.options());
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "attnlab::fused_linear_backward", [&] {
        const auto run = N * I * O <= kLoopMacs ? backward_loops<scalar_t> : backward_blas<scalar_t>;
        run(dy.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
            need_x ? dx.data_ptr<scalar_t>() : nullptr, need_w ? dw.data_ptr<scalar_t>() : nullptr,
            need_b ? db.data_ptr<scalar_t>() : nullptr, N, I, O, L);
      });
    }
    return {dx, dw, db, Tensor()};
  }
};

bool cpu_strided(const Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !at::isTensorSubclassLike(t) &&
         !t._fw_grad(/*level=*/0).defined();
}

/// linear_supported() for an x whose rows have `in` features (its last dimension, or heads of it).
bool supported(const Tensor& x, int64_t in, const Tensor& weight, const Tensor& bias) {
  if (composed_only() || at::autocast::is_autocast_enabled(at::kCPU)) return false;
  if (!cpu_strided(x) || !cpu_strided(weight) || x.dim() < 1 || weight.dim() != 2) return false;
  const auto dtype = x.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kDouble) || weight.scalar_type() != dtype) return false;
  if (weight.size(1) < 1 || weight.size(1) != in) return false;
  if (bias.defined()) {
    if (!cpu_strided(bias) || bias.scalar_type() != dtype || bias.dim() != 1 || bias.size(0) != weight.size(0)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool linear_supported(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return x.dim() >= 1 && supported(x, x.size(-1), weight, bias);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!linear_supported(x, weight, bias)) return torch::linear(x, weight, bias);
  return Linear::apply(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt, Layout{});
}

Tensor linear_split_heads(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads, bool fold) {
  TORCH_CHECK(x.dim() == 3 && heads >= 1 && weight.dim() == 2 && weight.size(0) % heads == 0,
              "linear_split_heads: expected x [B, T, in] and weight [out, in] with heads (", heads,
              ") dividing out, found ", x.sizes(), " and ", weight.sizes());
  const int64_t B = x.size(0), T = x.size(1), d = weight.size(0) / heads;
  Tensor y;  // [B, heads, T, d]
  if (!linear_supported(x, weight, bias) || T == 0) {
    y = torch::linear(x, weight, bias).reshape({B, T, heads, d}).permute({0, 2, 1, 3}).contiguous();
  } else {
    y = Linear::apply(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt,
                      Layout{T, heads, false, true});
  }
  return fold ? y.view({B * heads, T, d}) : y;
}

Tensor linear_merge_heads(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads) {
  TORCH_CHECK(
      x.dim() == 3 && heads >= 1 && x.size(0) % heads == 0 && weight.dim() == 2 && weight.size(1) == heads * x.size(2),
      "linear_merge_heads: expected x [B * heads, T, d] with heads = ", heads, " and weight [out, heads * d], found ",
      x.sizes(), " and ", weight.sizes());
  const int64_t T = x.size(1);
  if (!supported(x, heads * x.size(2), weight, bias) || T == 0) {
    const int64_t B = x.size(0) / heads;
    const auto merged = x.reshape({B, heads, T, x.size(2)}).permute({0, 2, 1, 3}).reshape({B, T, weight.size(1)});
    return torch::linear(merged, weight, bias);
  }
  return Linear::apply(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt,
                       Layout{T, heads, true, false});
}

}  // namespace attnlab::nn::fused
