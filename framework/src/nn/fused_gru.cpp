// The fused GRU module: torch::nn::GRU's parameters, the layers one fused autograd node each
// (fused_gru_layer.cpp), at::gru where the fused path does not apply.
#include <attnlab/nn/fused_gru.hpp>

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>
#include <string>

namespace attnlab::nn {

FusedGruImpl::FusedGruImpl(const FusedGruOptions& options_) : options(options_) {
  // NOLINTNEXTLINE(clang-analyzer-optin.cplusplus.VirtualCall): as torch's modules do
  reset();
}

void FusedGruImpl::reset() {
  const auto& o = options;
  TORCH_CHECK(o.input_size() > 0 && o.hidden_size() > 0 && o.num_layers() > 0,
              "FusedGru: input_size, hidden_size and num_layers must be greater than zero, found ", o.input_size(),
              ", ", o.hidden_size(), " and ", o.num_layers());
  TORCH_CHECK(0 <= o.dropout() && o.dropout() <= 1, "FusedGru: dropout must be in [0, 1], found ", o.dropout());
  if (o.dropout() > 0 && o.num_layers() == 1) {
    TORCH_WARN("FusedGru: dropout is applied between layers, so dropout ", o.dropout(),
               " does nothing with num_layers 1");
  }
  const int64_t gates = 3 * o.hidden_size();
  w_ih_.clear();
  w_hh_.clear();
  b_ih_.clear();
  b_hh_.clear();
  for (int64_t layer = 0; layer < o.num_layers(); ++layer) {
    const auto k = std::to_string(layer);
    const int64_t in = layer == 0 ? o.input_size() : o.hidden_size();
    w_ih_.push_back(register_parameter("weight_ih_l" + k, torch::empty({gates, in})));
    w_hh_.push_back(register_parameter("weight_hh_l" + k, torch::empty({gates, o.hidden_size()})));
    b_ih_.push_back(register_parameter("bias_ih_l" + k, torch::empty({gates})));
    b_hh_.push_back(register_parameter("bias_hh_l" + k, torch::empty({gates})));
  }
  reset_parameters();
}

void FusedGruImpl::reset_parameters() {
  const double stdv = 1.0 / std::sqrt(static_cast<double>(options.hidden_size()));
  for (auto& p : parameters()) torch::nn::init::uniform_(p, -stdv, stdv);
}

std::vector<torch::Tensor> FusedGruImpl::flat_weights() const {
  std::vector<torch::Tensor> flat;
  flat.reserve(4 * w_ih_.size());
  for (size_t k = 0; k < w_ih_.size(); ++k) {
    flat.insert(flat.end(), {w_ih_[k], w_hh_[k], b_ih_[k], b_hh_[k]});
  }
  return flat;
}

bool FusedGruImpl::runs_fused(const torch::Tensor& input, const torch::Tensor& hx) const {
  if (!options.fused() || input.numel() == 0 || input.layout() != torch::kStrided) return false;
  const auto dtype = input.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  auto same = [&](const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == dtype; };
  if (!same(input) || !same(hx)) return false;
  for (const auto* params : {&w_ih_, &w_hh_, &b_ih_, &b_hh_}) {
    for (const auto& p : *params) {
      if (!same(p)) return false;
    }
  }
  return true;
}

std::tuple<torch::Tensor, torch::Tensor> FusedGruImpl::forward(const torch::Tensor& input, torch::Tensor hx) {
  const auto& o = options;
  // torch::nn::GRU's checks and messages (check_forward_args).
  TORCH_CHECK(input.dim() == 3, "input must have 3 dimensions, got ", input.dim());
  TORCH_CHECK(input.size(-1) == o.input_size(), "input.size(-1) must be equal to input_size. Expected ", o.input_size(),
              ", got ", input.size(-1));
  const int64_t batch = input.size(o.batch_first() ? 0 : 1);
  if (!hx.defined()) hx = torch::zeros({o.num_layers(), batch, o.hidden_size()}, input.options());
  TORCH_CHECK(hx.sizes() == at::IntArrayRef({o.num_layers(), batch, o.hidden_size()}), "Expected hidden size [",
              o.num_layers(), ", ", batch, ", ", o.hidden_size(), "], got ", hx.sizes());
  if (!runs_fused(input, hx)) {
    return at::gru(input, hx, flat_weights(), /*has_biases=*/true, o.num_layers(), o.dropout(), is_training(),
                   /*bidirectional=*/false, o.batch_first());
  }
  // As at::gru: layer k > 0 reads layer k - 1's time-major output, with dropout in training
  // (at::dropout on the same [T, B, H] tensor, so the same masks from the same generator state).
  torch::Tensor layer_input = input;
  // One node for all layers' initial states (select per layer would give each layer's gradient
  // its own [L, B, H] of zeros in the backward).
  const auto h0 = hx.unbind(0);       // each [B, H]
  std::vector<torch::Tensor> finals;  // each [B, H]
  finals.reserve(o.num_layers());
  for (int64_t k = 0; k < o.num_layers(); ++k) {
    auto [y, h_t] = fused_gru_layer(layer_input, h0[k], w_ih_[k], w_hh_[k], b_ih_[k], b_hh_[k],
                                    k == 0 && o.batch_first());  // [T, B, H], [B, H]
    finals.push_back(std::move(h_t));
    layer_input = o.dropout() > 0 && is_training() && k + 1 < o.num_layers() ? at::dropout(y, o.dropout(), true) : y;
  }
  auto output = o.batch_first() ? layer_input.transpose(0, 1) : layer_input;  // [B, T, H] or [T, B, H]
  return {output, at::stack(finals)};                                         // [L, B, H]
}

void FusedGruImpl::pretty_print(std::ostream& stream) const {
  stream << std::boolalpha << "attnlab::nn::FusedGru(input_size=" << options.input_size()
         << ", hidden_size=" << options.hidden_size() << ", num_layers=" << options.num_layers()
         << ", batch_first=" << options.batch_first() << ", dropout=" << options.dropout()
         << ", fused=" << options.fused() << ")";
}

}  // namespace attnlab::nn
