#include "attnlab/train/loss.hpp"

#include <torch/nn/functional/loss.h>
#include <attnlab/error.hpp>

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

}  // namespace attnlab::train
