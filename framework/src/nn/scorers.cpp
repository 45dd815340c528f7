// Additive, Gaussian-kernel and average scorers (d2l 0.17, sections 10.2 and 10.3).
#include <attnlab/nn/scorers.hpp>

#include <torch/torch.h>

namespace attnlab::nn {
namespace {

void check_qk(const char* who, const torch::Tensor& queries, const torch::Tensor& keys) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0), who,
              ": expected queries [B, Q, Dq] and keys [B, K, Dk] with one batch size, found ", queries.sizes(), " and ",
              keys.sizes());
}

}  // namespace

AdditiveScorerImpl::AdditiveScorerImpl(int64_t query_size, int64_t key_size, int64_t num_hiddens) {
  TORCH_CHECK(query_size >= 1 && key_size >= 1 && num_hiddens >= 1,
              "AdditiveScorer: query_size, key_size and num_hiddens must be >= 1, found ", query_size, ", ", key_size,
              " and ", num_hiddens);
  using torch::nn::LinearOptions;
  W_q = register_module("W_q", torch::nn::Linear(LinearOptions(query_size, num_hiddens).bias(false)));
  W_k = register_module("W_k", torch::nn::Linear(LinearOptions(key_size, num_hiddens).bias(false)));
  w_v = register_module("w_v", torch::nn::Linear(LinearOptions(num_hiddens, 1).bias(false)));
}

torch::Tensor AdditiveScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                        const Positions&) {
  check_qk("AdditiveScorer", queries, keys);
  TORCH_CHECK(queries.size(2) == W_q->options.in_features() && keys.size(2) == W_k->options.in_features(),
              "AdditiveScorer: built for query size ", W_q->options.in_features(), " and key size ",
              W_k->options.in_features(), ", found queries ", queries.sizes(), " and keys ", keys.sizes());
  auto q = W_q->forward(queries);                                // [B, Q, H]
  auto k = W_k->forward(keys);                                   // [B, K, H]
  auto features = torch::tanh(q.unsqueeze(2) + k.unsqueeze(1));  // [B, Q, K, H]
  return w_v->forward(features).squeeze(-1);                     // [B, Q, K]
}

GaussianKernelScorerImpl::GaussianKernelScorerImpl(double w, bool learnable) : learnable_(learnable) {
  auto value = torch::full({1}, w, torch::kFloat);  // [1]
  w_ = learnable ? register_parameter("w", value) : register_buffer("w", value);
}

torch::Tensor GaussianKernelScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                              const Positions&) {
  check_qk("GaussianKernelScorer", queries, keys);
  TORCH_CHECK(queries.size(2) == keys.size(2), "GaussianKernelScorer: queries and keys need one size, found ",
              queries.sizes(), " and ", keys.sizes());
  if (queries.size(2) == 1) {
    // Scalars, as in the book: -((q - k) * w)^2 / 2 on the differences themselves.
    auto diff = queries - keys.transpose(1, 2);  // [B, Q, K]
    return -(diff * w_).pow(2) / 2;              // [B, Q, K]
  }
  // Vectors: |q - k|^2 = |q|^2 + |k|^2 - 2 q.k without materialising [B, Q, K, D].
  auto qq = queries.pow(2).sum(-1, /*keepdim=*/true);                                // [B, Q, 1]
  auto kk = keys.pow(2).sum(-1).unsqueeze(1);                                        // [B, 1, K]
  auto sq = (qq + kk - 2 * torch::bmm(queries, keys.transpose(1, 2))).clamp_min(0);  // [B, Q, K]
  return -w_.pow(2) * sq / 2;                                                        // [B, Q, K]
}

torch::Tensor AverageScorerImpl::score(const torch::Tensor& queries, const torch::Tensor& keys,
                                       const Positions&) {
  check_qk("AverageScorer", queries, keys);
  return torch::zeros({queries.size(0), queries.size(1), keys.size(1)}, queries.options());  // [B, Q, K]
}

}  // namespace attnlab::nn
