#pragma once
// The token-level loss of the sequence-to-sequence trainers: cross-entropy of a decoder's outputs
// against the labels, <pad> positions ignored, with optional label smoothing.
#include <torch/types.h>

#include <cstdint>

namespace attnlab::train {

struct TokenLoss {
  int64_t pad = 0;             // label id that counts nothing (<pad>)
  bool probabilities = false;  // the decoder returns softmax outputs, not logits (d2l's GRU decoders)
  double label_smoothing = 0;  // ε in [0, 1): the target is 1 - ε on the label plus ε / V on every class
  enum class Reduce { mean, sum } reduce = Reduce::mean;  // mean over non-pad labels, or their sum
};

/// The loss of `out` [..., V] (logits, or probabilities) against `labels` [...]: per label
/// (1 - ε) · -log p(label) + ε · mean over the V classes of -log p(class), which is
/// torch::nn::functional::cross_entropy(..., label_smoothing(ε), ignore_index(pad)) for logits and
/// the same computed on log(max(p, 1e-12)) for probabilities; 0 with no non-pad label (a sum), nan
/// (a mean). A 0-dim tensor on `out`'s device.
torch::Tensor token_loss(const torch::Tensor& out, const torch::Tensor& labels, const TokenLoss& how);

/// R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks"): `out1` and `out2`
/// are two forward passes of the same batch under independent dropout masks; per non-pad label
/// the loss is the mean of their token losses plus α/4 · (KL(p1 ‖ p2) + KL(p2 ‖ p1)), half the
/// paper's Eq. 3 (ℓ1 + ℓ2 + α/2 · the symmetric KL), so α is the paper's and α = 0 is the mean of
/// the two losses. Gradients reach both passes. Reduced as `how` says (nan for a mean of nothing).
torch::Tensor rdrop_loss(const torch::Tensor& out1, const torch::Tensor& out2, const torch::Tensor& labels,
                         const TokenLoss& how, double alpha);

}  // namespace attnlab::train
