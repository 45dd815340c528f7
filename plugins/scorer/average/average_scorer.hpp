#pragma once
// Average pooling (d2l 0.17, section 10.2.2), the "average" plugin's scorer (used by this plugin
// alone; tests/ tests it).
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/pimpl.h>

namespace attnlab::scorers::average {

/// Average pooling, the "dumbest estimator": every score is 0, so the masked softmax gives
/// uniform weights over the valid keys.
class AverageScorerImpl : public nn::Scorer {
 public:
  AverageScorerImpl() = default;
  /// queries [B, Q, Dq], keys [B, K, Dk] -> zeros [B, Q, K] (queries' dtype and device)
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions& positions) override;
};
TORCH_MODULE(AverageScorer);

}  // namespace attnlab::scorers::average
