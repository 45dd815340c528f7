#include "attnlab/train/loss.hpp"

#include <torch/nn/functional/loss.h>
#include <attnlab/error.hpp>

#include <cmath>

namespace attnlab::train {

torch::Tensor token_loss(const torch::Tensor& out, const torch::Tensor& labels, const TokenLoss& how) {
  ATTNLAB_CHECK(how.label_smoothing >= 0 && how.label_smoothing < 1, ConfigError,
                "label smoothing must be in [0, 1), found {}", how.label_smoothing);
  namespace F = torch::nn::functional;
  auto flat = out.reshape({-1, out.size(-1)});  // [N, V]
  auto y = labels.reshape(-1);                  // [N]
  const bool mean = how.reduce == TokenLoss::Reduce::mean;
  const F::CrossEntropyFuncOptions::reduction_t reduction =
      mean ? F::CrossEntropyFuncOptions::reduction_t(torch::kMean) : torch::kSum;
  if (!how.probabilities) {
    return F::cross_entropy(
        flat, y,
        F::CrossEntropyFuncOptions().ignore_index(how.pad).label_smoothing(how.label_smoothing).reduction(reduction));
  }
  auto log_p = torch::log(flat.clamp_min(1e-12));  // [N, V]
  if (how.label_smoothing == 0) {
    return F::nll_loss(log_p, y, F::NLLLossFuncOptions().ignore_index(how.pad).reduction(reduction));
  }
  const auto keep = y.ne(how.pad);                                      // [N]
  const auto safe = y.masked_fill(keep.logical_not(), 0).unsqueeze(1);  // [N, 1], pad rows point at class 0
  const auto nll = -log_p.gather(1, safe).squeeze(1);                   // [N]
  const auto smooth = -log_p.mean(1);                                   // [N]
  const double eps = how.label_smoothing;
  const auto per_label = ((1 - eps) * nll + eps * smooth).masked_fill(keep.logical_not(), 0);
  auto total = per_label.sum();
  return mean ? total / keep.sum() : total;
}

torch::Tensor rdrop_loss(const torch::Tensor& out1, const torch::Tensor& out2, const torch::Tensor& labels,
                         const TokenLoss& how, double alpha) {
  ATTNLAB_CHECK(alpha >= 0 && std::isfinite(alpha), ConfigError, "R-Drop's alpha must be >= 0, found {}", alpha);
  ATTNLAB_CHECK(out1.sizes() == out2.sizes(), ConfigError,
                "R-Drop compares two passes of one batch, but their outputs differ in shape: {} vs {}", c10::str(out1.sizes()),
                c10::str(out2.sizes()));
  TokenLoss summed = how;
  summed.reduce = TokenLoss::Reduce::sum;
  auto total = (token_loss(out1, labels, summed) + token_loss(out2, labels, summed)) / 2;
  const auto keep = labels.reshape(-1).ne(how.pad);  // [N]
  if (alpha > 0) {
    const auto log_p = [&](const torch::Tensor& out) {  // [N, V], in float at least (bf16 autocast)
      auto flat = out.reshape({-1, out.size(-1)});
      if (flat.scalar_type() != torch::kDouble) flat = flat.to(torch::kFloat);
      return how.probabilities ? torch::log(flat.clamp_min(1e-12)) : torch::log_softmax(flat, -1);
    };
    const auto lp1 = log_p(out1), lp2 = log_p(out2);
    // KL(p1 ‖ p2) + KL(p2 ‖ p1) = Σ_v (p1 - p2)(log p1 - log p2), per label.
    const auto symmetric = ((lp1.exp() - lp2.exp()) * (lp1 - lp2)).sum(-1);  // [N]
    total = total + (alpha / 4) * symmetric.masked_fill(keep.logical_not(), 0).sum().to(total.scalar_type());
  }
  return how.reduce == TokenLoss::Reduce::mean ? total / keep.sum() : total;
}

}  // namespace attnlab::train
