// The average-pooling scorer (d2l 0.17, section 10.2.2).
#include "average_scorer.hpp"

#include <attnlab/nn/scorer_checks.hpp>

#include <torch/types.h>

namespace attnlab::scorers::average {

torch::Tensor AverageScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                       const nn::Positions&) {
  nn::check_queries_and_keys("AverageScorer", queries, keys);
  return torch::zeros({queries.size(0), queries.size(1), keys.size(1)}, queries.options());  // [B, Q, K]
}

}  // namespace attnlab::scorers::average
