// One model's or an ensemble's next-token log-probabilities, step by step; see step_decoder.hpp.
#include "train/step_decoder.hpp"

#include <attnlab/error.hpp>

#include <torch/types.h>

#include <cmath>

namespace attnlab::train {

StepDecoder::StepDecoder(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
                         const torch::Tensor& src_valid_lens)
    : models_(models) {
  ATTNLAB_CHECK(!models_.empty(), ConfigError, "decoding needs at least one model, found none");
  for (auto& model : models_) {
    ATTNLAB_CHECK(!model.is_empty(), ConfigError, "decoding: an ensemble member is an empty model holder");
    eval_.emplace_back(*model);
    auto enc = model->encode(src, src_valid_lens);  // states [B, S, H]
    states_.push_back(model->init_state(enc, /*incremental=*/true));
  }
}

torch::Tensor StepDecoder::log_probs(const torch::Tensor& tokens) {
  std::vector<torch::Tensor> each;  // [R, V] per model
  each.reserve(models_.size());
  for (size_t i = 0; i < models_.size(); ++i) {
    auto out = models_[i]->decode(tokens, *states_[i]).squeeze(1).to(torch::kDouble);  // [R, V]
    each.push_back(models_[i]->decoder().outputs_probabilities() ? torch::log(out.clamp_min(1e-300))
                                                                  : torch::log_softmax(out, -1));
    ATTNLAB_CHECK(each.back().size(-1) == each.front().size(-1), PluginError,
                  "ensemble members disagree on the target vocabulary: member 1 gives {} next-token scores, "
                  "member {} gives {}; an ensemble needs models trained on one vocabulary",
                  each.front().size(-1), i + 1, each.back().size(-1));
  }
  if (each.size() == 1) return each.front();
  // log((1/n) sum_i p_i) = logsumexp_i(log p_i) - log n, stable where members are confident.
  return torch::logsumexp(torch::stack(each), 0) - std::log(static_cast<double>(each.size()));
}

void StepDecoder::reorder(const torch::Tensor& indices) {
  for (auto& state : states_) state->reorder(indices);
}

}  // namespace attnlab::train
