#pragma once
// A GRU stack with torch::nn::GRU's parameters (names, shapes, registration order, init) and
// results, that runs on CPU as a fused kernel: per layer one GEMM for every step's input
// projection, then per step one GEMM with W_hh and one pass over [B, H] for all gates and the new
// state; the whole layer is one autograd node with a hand-written backward (one pass per step and
// a GEMM, the weight gradients one GEMM each over all steps). ATen's CPU GRU records about ten ops
// per step, each with its own autograd node. fused(false), CUDA tensors and dtypes other than
// float and double run at::gru, torch::nn::GRU's own code, on the same parameters.
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <ostream>
#include <tuple>
#include <vector>

namespace attnlab::nn {

/// torch::nn::GRUOptions' subset the GRU plugins use: bias always, one direction.
struct FusedGruOptions {
  FusedGruOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);        // I
  TORCH_ARG(int64_t, hidden_size);       // H
  TORCH_ARG(int64_t, num_layers) = 1;    // L
  TORCH_ARG(double, dropout) = 0.0;      // on every layer's output but the last's, in training
  TORCH_ARG(bool, batch_first) = false;  // input and output [B, T, *] instead of [T, B, *]
  TORCH_ARG(bool, fused) = true;         // false: at::gru (torch::nn::GRU's kernel) always
};

class FusedGruImpl : public torch::nn::Cloneable<FusedGruImpl> {
 public:
  explicit FusedGruImpl(const FusedGruOptions& options);
  FusedGruImpl(int64_t input_size, int64_t hidden_size) : FusedGruImpl(FusedGruOptions(input_size, hidden_size)) {}

  /// Registers weight_ih_l{k} [3H, I or H], weight_hh_l{k} [3H, H], bias_ih_l{k}, bias_hh_l{k}
  /// [3H] for every layer k, in torch::nn::GRU's order, and draws them as it does.
  void reset() override;
  /// U(-1/√H, 1/√H) for every parameter, in registration order (torch's reset_parameters).
  void reset_parameters();

  /// input [B, T, I] (batch_first) or [T, B, I], hx [L, B, H] (zeros when undefined) ->
  /// output [B, T, H] or [T, B, H] (last layer, every step), h_n [L, B, H] (every layer, last step).
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input, torch::Tensor hx = {});

  /// Whether forward takes the fused path for these tensors (else at::gru).
  bool runs_fused(const torch::Tensor& input, const torch::Tensor& hx) const;
  /// The parameters in at::gru's order: weight_ih, weight_hh, bias_ih, bias_hh of each layer.
  std::vector<torch::Tensor> flat_weights() const;

  void pretty_print(std::ostream& stream) const override;

  FusedGruOptions options;

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(torch::Tensor())})

 private:
  std::vector<torch::Tensor> w_ih_, w_hh_, b_ih_, b_hh_;  // per layer, registered
};
TORCH_MODULE(FusedGru);

/// One layer of the fused path (CPU, float or double, T >= 1, B >= 1), one autograd node:
/// x [B, T, I] (batch_first) or [T, B, I], h0 [B, H], w_ih [3H, I], w_hh [3H, H], b_ih and b_hh
/// [3H] -> outputs [T, B, H] (time-major whatever x is, as at::gru's between layers), h_T [B, H].
/// Its backward is not differentiable: a double backward (create_graph) throws.
std::tuple<torch::Tensor, torch::Tensor> fused_gru_layer(const torch::Tensor& x, const torch::Tensor& h0,
                                                         const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                                                         const torch::Tensor& b_ih, const torch::Tensor& b_hh,
                                                         bool batch_first);

}  // namespace attnlab::nn
