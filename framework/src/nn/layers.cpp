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
                                         double inner_dropout, bool conv1d, Activation activation)
    : activation_(activation) {
  if (conv1d) {
    conv1 = register_module("conv1", torch::nn::Conv1d(torch::nn::Conv1dOptions(in_size, ffn_hiddens, 1)));
    conv2 = register_module("conv2", torch::nn::Conv1d(torch::nn::Conv1dOptions(ffn_hiddens, out_size, 1)));
  } else {
    dense1 = register_module("dense1", torch::nn::Linear(in_size, ffn_hiddens));
    dense2 = register_module("dense2", torch::nn::Linear(ffn_hiddens, out_size));
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
  auto h = dropout_->forward(activate(fused::linear(x, dense1->weight, dense1->bias)));  // [B, T, ffn_hiddens]
  return fused::linear(h, dense2->weight, dense2->bias);                                    // [B, T, out]
}

AddNormImpl::AddNormImpl(int64_t num_hiddens, double dropout, NormPlacement placement_, double eps, bool fused_)
    : placement(placement_), fused(fused_) {
  ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({num_hiddens}).eps(eps)));
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor AddNormImpl::pre(const torch::Tensor& x) {
  if (placement != NormPlacement::First) return x;
  return fused ? fused::layer_norm(x, ln->weight, ln->bias, ln->options.eps()) : ln->forward(x);  // [B, T, H]
}

torch::Tensor AddNormImpl::post(const torch::Tensor& x, const torch::Tensor& y) {
  if (fused) {
    // In eval, and on what the kernels do not take, these are the composition below.
    const double p = dropout_->options.p();
    if (placement == NormPlacement::First) return fused::add_dropout(x, y, p, is_training());  // [B, T, H]
    return fused::add_dropout_layer_norm(x, y, ln->weight, ln->bias, p, is_training(),
                                         ln->options.eps());  // [B, T, H]
  }
  if (placement == NormPlacement::First) return x + dropout_->forward(y);  // [B, T, H]
  return ln->forward(dropout_->forward(y) + x);                            // [B, T, H]
}

}  // namespace attnlab::nn
