// Positional encoding, position-wise FFN and add & norm (d2l 1.0.3, chapter 11.6 / 11.7).
#include <attnlab/nn/layers.hpp>

#include <attnlab/nn/fused.hpp>

#include "nn/fused_linear.hpp"
#include "nn/fused_norm.hpp"

namespace attnlab::nn {

PositionalEncodingImpl::PositionalEncodingImpl(int64_t num_hiddens, double dropout, int64_t max_len,
                                               AbsolutePositions kind)
    : kind_(kind == AbsolutePositions::Auto ? AbsolutePositions::Sinusoidal : kind) {
  TORCH_CHECK(num_hiddens >= 1 && max_len >= 1, "PositionalEncoding: num_hiddens and max_len must be >= 1, found ",
              num_hiddens, " and ", max_len);
  auto p = torch::zeros({1, max_len, num_hiddens});  // [1, max_len, H]
  auto x = torch::arange(max_len, torch::kFloat32).reshape({-1, 1}) /
           torch::pow(10000, torch::arange(0, num_hiddens, 2, torch::kFloat32) / num_hiddens);  // [max_len, ceil(H/2)]
  using torch::indexing::None;
  using torch::indexing::Slice;
  p.index_put_({Slice(), Slice(), Slice(0, None, 2)}, torch::sin(x));
  const int64_t odd = num_hiddens / 2;  // number of odd columns (one fewer than even ones when H is odd)
  p.index_put_({Slice(), Slice(), Slice(1, None, 2)}, torch::cos(x.narrow(1, 0, odd)));
  P = register_buffer("P", p);
  if (kind_ == AbsolutePositions::Learned) {
    table = register_parameter("table", torch::empty({max_len, num_hiddens}).normal_(0.0, 0.02));  // [max_len, H]
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

void PositionalEncodingImpl::switch_off() {
  TORCH_CHECK(kind_ != AbsolutePositions::Learned, "PositionalEncoding: a learned table cannot be switched off");
  kind_ = AbsolutePositions::None;
}

torch::Tensor PositionalEncodingImpl::forward(const torch::Tensor& x, int64_t offset) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == P.size(2), "PositionalEncoding: expected [B, T, ", P.size(2),
              "], found ", x.sizes());
  TORCH_CHECK(offset >= 0 && offset + x.size(1) <= P.size(1), "PositionalEncoding: positions ", offset, "..",
              offset + x.size(1) - 1, " exceed max_len ", P.size(1));
  switch (kind_) {
    case AbsolutePositions::None:
      return dropout_->forward(x);  // [B, T, H]
    case AbsolutePositions::Learned:
      return dropout_->forward(x + table.narrow(0, offset, x.size(1)).to(x.dtype()));  // [B, T, H]
    default:
      return dropout_->forward(x + P.narrow(1, offset, x.size(1)).to(x.device()));  // [B, T, H]
  }
}

PositionWiseFFNImpl::PositionWiseFFNImpl(int64_t in_size, int64_t ffn_hiddens, int64_t out_size,
                                         double inner_dropout, bool conv1d, Activation activation, bool bias)
    : activation_(activation) {
  TORCH_CHECK(!(conv1d && activation == Activation::SwiGLU),
              "PositionWiseFFN: SwiGLU has linear layers only (ffn: linear), found conv1d");
  if (conv1d) {
    conv1 = register_module("conv1", torch::nn::Conv1d(torch::nn::Conv1dOptions(in_size, ffn_hiddens, 1).bias(bias)));
    conv2 = register_module("conv2", torch::nn::Conv1d(torch::nn::Conv1dOptions(ffn_hiddens, out_size, 1).bias(bias)));
  } else {
    dense1 = register_module("dense1", torch::nn::Linear(torch::nn::LinearOptions(in_size, ffn_hiddens).bias(bias)));
    dense2 = register_module("dense2", torch::nn::Linear(torch::nn::LinearOptions(ffn_hiddens, out_size).bias(bias)));
  }
  if (activation == Activation::SwiGLU) {
    gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(in_size, ffn_hiddens).bias(bias)));
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(inner_dropout));
}

torch::Tensor PositionWiseFFNImpl::activate(const torch::Tensor& h) const {
  switch (activation_) {
    case Activation::GELU:
      return torch::gelu(h);
    case Activation::GELUTanh:
      return torch::gelu(h, "tanh");
    default:
      return torch::relu(h);
  }
}

torch::Tensor PositionWiseFFNImpl::forward(const torch::Tensor& x) {
  if (conv1) {
    TORCH_CHECK(x.dim() == 3, "PositionWiseFFN (conv1d): expected x [B, T, in], found ", x.sizes());
    auto h = dropout_->forward(activate(conv1->forward(x.transpose(1, 2))));  // [B, ffn_hiddens, T]
    return conv2->forward(h).transpose(1, 2);                                    // [B, T, out]
  }
  auto up = fused::linear(x, dense1->weight, dense1->bias);  // [B, T, ffn_hiddens]
  auto h = gate ? torch::silu(fused::linear(x, gate->weight, gate->bias)) * up : activate(up);
  return fused::linear(dropout_->forward(h), dense2->weight, dense2->bias);  // [B, T, out]
}

RMSNormImpl::RMSNormImpl(int64_t num_hiddens_, double eps_) : num_hiddens(num_hiddens_), eps(eps_) { reset(); }

void RMSNormImpl::reset() { weight = register_parameter("weight", torch::ones({num_hiddens})); }

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == num_hiddens, "RMSNorm: expected [..., ", num_hiddens, "], found ",
              x.sizes());
  // Hugging Face's LlamaRMSNorm: the statistics in float32 even for half-precision inputs.
  const auto h = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  const auto normed = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);  // [..., H]
  return weight * normed.to(x.scalar_type());                                       // [..., H]
}

AddNormImpl::AddNormImpl(int64_t num_hiddens, double dropout, NormPlacement placement_, double eps, bool fused_,
                         NormType type)
    : placement(placement_), fused(fused_) {
  if (type == NormType::RMS) {
    rms = register_module("ln", RMSNorm(num_hiddens, eps));
  } else {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({num_hiddens}).eps(eps)));
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor AddNormImpl::norm(const torch::Tensor& x) {
  if (rms) return rms->forward(x);                                                                 // [B, T, H]
  return fused ? fused::layer_norm(x, ln->weight, ln->bias, ln->options.eps()) : ln->forward(x);  // [B, T, H]
}

torch::Tensor AddNormImpl::pre(const torch::Tensor& x) {
  return placement == NormPlacement::First ? norm(x) : x;  // [B, T, H]
}

torch::Tensor AddNormImpl::post(const torch::Tensor& x, const torch::Tensor& y) {
  if (fused) {
    // In eval, and on what the kernels do not take, these are the composition below.
    const double p = dropout_->options.p();
    if (placement == NormPlacement::First) return fused::add_dropout(x, y, p, is_training());  // [B, T, H]
    if (ln) return fused::add_dropout_layer_norm(x, y, ln->weight, ln->bias, p, is_training(), ln->options.eps());
  }
  if (placement == NormPlacement::First) return x + dropout_->forward(y);  // [B, T, H]
  return norm(dropout_->forward(y) + x);                                   // [B, T, H]
}

}  // namespace attnlab::nn
