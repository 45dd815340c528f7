// The additive (Bahdanau) scorer (d2l 0.17, section 10.3).
#include "additive_scorer.hpp"

#include "additive_kernels.hpp"

#include <attnlab/nn/scorer_checks.hpp>

#include <ATen/autocast_mode.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

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
  auto k = project_keys(keys);     // [B, K, H]
  if (fused && fused_scores_supported(q, k, w_v->weight)) return fused_scores(q, k, w_v->weight);
  auto features = torch::tanh(q.unsqueeze(2) + k.unsqueeze(1));  // [B, Q, K, H]
  return w_v->forward(features).squeeze(-1);                     // [B, Q, K]
}

std::optional<torch::Tensor> AdditiveScorerImpl::attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                                        const torch::Tensor& values, const torch::Tensor& valid_lens,
                                                        const nn::Positions& positions, double dropout, bool training) {
  const bool drops = training && dropout > 0;
  if (!fused || (drops && dropout >= 1) || at::autocast::is_autocast_enabled(at::kCPU)) return std::nullopt;
  const auto& w = w_v->weight;
  // The projections keep the dtype of queries and keys, so these decide before any work is done.
  const bool cpu = queries.device().is_cpu() && keys.device().is_cpu() && W_q->weight.device().is_cpu() &&
                   W_k->weight.device().is_cpu() && w.device().is_cpu();
  const auto dtype = queries.scalar_type();
  if (!cpu || (dtype != torch::kFloat && dtype != torch::kDouble) || keys.scalar_type() != dtype ||
      W_q->weight.scalar_type() != dtype || W_k->weight.scalar_type() != dtype || w.scalar_type() != dtype ||
      queries.dim() != 3 || keys.dim() != 3 || queries.size(2) != W_q->options.in_features() ||
      keys.size(2) != W_k->options.in_features()) {
    return std::nullopt;
  }
  if (queries.size(0) != keys.size(0) ||
      !fused_attend_takes(queries.size(0), queries.size(1), keys.size(1), dtype, values, valid_lens)) {
    return std::nullopt;
  }
  auto q = W_q->forward(queries);  // [B, Q, H]
  auto k = project_keys(keys);     // [B, K, H]
  torch::Tensor noise;             // at::dropout's on the CPU: bernoulli(1 - p) / (1 - p), weights' shape
  if (drops) {
    noise = torch::empty({q.size(0), q.size(1), k.size(1)}, q.options()).bernoulli_(1 - dropout).div_(1 - dropout);
  }
  return fused_attend(q, k, w, values, valid_lens, noise);
}

torch::Tensor AdditiveScorerImpl::project_keys(const torch::Tensor& keys) {
  const auto& w = W_k->weight;
  // Inference tensors have no version counter, and nothing saves the projection there anyway.
  if (!keys.device().is_cpu() || keys.is_inference() || c10::InferenceMode::is_enabled() ||
      at::autocast::is_autocast_enabled(at::kCPU)) {
    memo_k_.reset();
    return W_k->forward(keys);
  }
  const bool grad = at::GradMode::is_enabled();
  if (memo_k_ && memo_keys_->lock().get() == keys.unsafeGetTensorImpl() && keys._version() == memo_keys_version_ &&
      w.unsafeGetTensorImpl() == memo_weight_ && w.const_data_ptr() == memo_weight_data_ &&
      w._version() == memo_weight_version_ && grad == memo_grad_) {
    if (auto k = memo_k_->lock(); k.defined()) return torch::Tensor(std::move(k));
  }
  auto k = W_k->forward(keys);  // [B, K, H]
  memo_keys_.emplace(keys.getIntrusivePtr());
  memo_k_.emplace(k.getIntrusivePtr());
  memo_keys_version_ = keys._version();
  memo_weight_ = w.unsafeGetTensorImpl();
  memo_weight_data_ = w.const_data_ptr();
  memo_weight_version_ = w._version();
  memo_grad_ = grad;
  return k;
}

}  // namespace attnlab::scorers::additive
