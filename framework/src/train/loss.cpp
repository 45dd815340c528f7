#include "attnlab/train/loss.hpp"

#include <torch/nn/functional/loss.h>
#include <attnlab/error.hpp>

#include <cmath>

namespace attnlab::train {
namespace {
namespace F = torch::nn::functional;

void check_smoothing(const TokenLoss& how) {
  ATTNLAB_CHECK(how.label_smoothing >= 0 && how.label_smoothing < 1, ConfigError,
                "label smoothing must be in [0, 1), found {}", how.label_smoothing);
}

/// log p of a decoder's outputs: `out` [..., V] -> [N, V]; in float at least (bf16 autocast).
torch::Tensor log_probabilities(const torch::Tensor& out, const TokenLoss& how) {
  auto flat = out.reshape({-1, out.size(-1)});
  if (flat.scalar_type() != torch::kDouble) flat = flat.to(torch::kFloat);
  return how.probabilities ? torch::log(flat.clamp_min(1e-12)) : torch::log_softmax(flat, -1);
}

/// The token loss of log-probabilities `log_p` [N, V] against `y` [N].
torch::Tensor loss_of_log_probabilities(const torch::Tensor& log_p, const torch::Tensor& y, const TokenLoss& how) {
  const bool mean = how.reduce == TokenLoss::Reduce::mean;
  if (how.label_smoothing == 0) {
    return F::nll_loss(log_p, y,
                       F::NLLLossFuncOptions().ignore_index(how.pad).reduction(
                           mean ? F::NLLLossFuncOptions::reduction_t(torch::kMean) : torch::kSum));
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

}  // namespace

torch::Tensor token_loss(const torch::Tensor& out, const torch::Tensor& labels, const TokenLoss& how) {
  check_smoothing(how);
  const auto y = labels.reshape(-1);  // [N]
  if (how.probabilities) {
    auto log_p = torch::log(out.reshape({-1, out.size(-1)}).clamp_min(1e-12));  // [N, V]
    return loss_of_log_probabilities(log_p, y, how);
  }
  const F::CrossEntropyFuncOptions::reduction_t reduction =
      how.reduce == TokenLoss::Reduce::mean ? F::CrossEntropyFuncOptions::reduction_t(torch::kMean) : torch::kSum;
  return F::cross_entropy(
      out.reshape({-1, out.size(-1)}), y,
      F::CrossEntropyFuncOptions().ignore_index(how.pad).label_smoothing(how.label_smoothing).reduction(reduction));
}

torch::Tensor rdrop_loss(const torch::Tensor& out1, const torch::Tensor& out2, const torch::Tensor& labels,
                         const TokenLoss& how, double alpha) {
  check_smoothing(how);
  ATTNLAB_CHECK(alpha >= 0 && std::isfinite(alpha), ConfigError, "R-Drop's alpha must be >= 0, found {}", alpha);
  ATTNLAB_CHECK(out1.sizes() == out2.sizes(), ConfigError,
                "R-Drop compares two passes of one batch, but their outputs differ in shape: {} vs {}",
                c10::str(out1.sizes()), c10::str(out2.sizes()));
  // One log-softmax per pass serves both the token losses and the KL term.
  const auto lp1 = log_probabilities(out1, how), lp2 = log_probabilities(out2, how);  // [N, V]
  const auto y = labels.reshape(-1);                                                 // [N]
  TokenLoss summed = how;
  summed.reduce = TokenLoss::Reduce::sum;
  auto total = (loss_of_log_probabilities(lp1, y, summed) + loss_of_log_probabilities(lp2, y, summed)) / 2;
  const auto keep = y.ne(how.pad);  // [N]
  if (alpha > 0) {
    // KL(p1 ‖ p2) + KL(p2 ‖ p1) = Σ_v (p1 - p2)(log p1 - log p2), per label.
    const auto symmetric = ((lp1.exp() - lp2.exp()) * (lp1 - lp2)).sum(-1);  // [N]
    total = total + (alpha / 4) * symmetric.masked_fill(keep.logical_not(), 0).sum();
  }
  return how.reduce == TokenLoss::Reduce::mean ? total / keep.sum() : total;
}

}  // namespace attnlab::train
