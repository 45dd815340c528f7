// The additive (Bahdanau) scorer (d2l 0.17, section 10.3).
#include "additive_scorer.hpp"

#include "additive_kernels.hpp"

#include <attnlab/nn/scorer_checks.hpp>

#include <torch/torch.h>

namespace attnlab::scorers::additive {

AdditiveScorerImpl::AdditiveScorerImpl(int64_t query_size, int64_t key_size, int64_t num_hiddens, bool fused)
    : fused(fused) {
  TORCH_CHECK(query_size >= 1 && key_size >= 1 && num_hiddens >= 1,
              "AdditiveScorer: query_size, key_size and num_hiddens must be >= 1, found ", query_size, ", ", key_size,
              " and ", num_hiddens);
  using torch::nn::LinearOptions;
  W_q = register_module("W_q", torch::nn::Linear(LinearOptions(query_size, num_hiddens).bias(false)));
  W_k = register_module("W_k", torch::nn::Linear(LinearOptions(key_size, num_hiddens).bias(false)));
  w_v = register_module("w_v", torch::nn::Linear(LinearOptions(num_hiddens, 1).bias(false)));
}

torch::Tensor AdditiveScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const nn::Positions&) {
  nn::check_queries_and_keys("AdditiveScorer", queries, keys);
  TORCH_CHECK(queries.size(2) == W_q->options.in_features() && keys.size(2) == W_k->options.in_features(),
              "AdditiveScorer: built for query size ", W_q->options.in_features(), " and key size ",
              W_k->options.in_features(), ", found queries ", queries.sizes(), " and keys ", keys.sizes());
  auto q = W_q->forward(queries);  // [B, Q, H]
  auto k = W_k->forward(keys);     // [B, K, H]
  if (fused && fused_scores_supported(q, k, w_v->weight)) return fused_scores(q, k, w_v->weight);
  auto features = torch::tanh(q.unsqueeze(2) + k.unsqueeze(1));  // [B, Q, K, H]
  return w_v->forward(features).squeeze(-1);                     // [B, Q, K]
}

}  // namespace attnlab::scorers::additive
