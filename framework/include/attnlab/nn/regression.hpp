#pragma once
// Sequence-to-sequence regression on continuous features (Step-by-Step ch. 10): a "model" plugin
// that implements SequenceRegressor can be trained by the "regression" trainer, which finds the
// interface with std::dynamic_pointer_cast<nn::SequenceRegressor>(ctx.custom) (the typeinfo lives
// in libattnlab, so the cast works across plugin libraries).
#include <attnlab/nn/model.hpp>

#include <torch/types.h>

#include <cstdint>

namespace attnlab::nn {

class SequenceRegressor : public Model {
 public:
  ~SequenceRegressor() override;  // defined in libattnlab (key function)

  /// Teacher forcing with the causal mask: src [B, S, F], tgt_in [B, T, F] (the last source point
  /// followed by target[:-1]) -> predictions [B, T, F] (row t predicts target[t]).
  virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) = 0;

  /// Autoregressive prediction (Step-by-Step's `predict`): starts from the last source point and
  /// feeds each prediction back as the next decoder input. src [B, S, F] -> [B, steps, F].
  /// While a recorder is active, each step's pass records from query position 0, so the recorder
  /// ends with the last step's weights (all `steps` queries).
  virtual torch::Tensor predict(const torch::Tensor& src, int64_t steps) = 0;

  /// Features per time step F.
  virtual int64_t num_features() const = 0;
};

/// Xavier-uniform initialisation of every parameter with more than one dimension (the book's
/// `for p in model.parameters(): if p.dim() > 1: nn.init.xavier_uniform_(p)`), except the tables
/// a scorer or a learned positional encoding registers itself, which keep their own start.
void xavier_uniform_init(torch::nn::Module& module);

/// The decoder input for teacher forcing: cat(src[:, -1:], target[:, :-1]) along time.
/// src [B, S, F], target [B, T, F] -> [B, T, F]
torch::Tensor shift_target(const torch::Tensor& src, const torch::Tensor& target);

}  // namespace attnlab::nn
