// The lm trainer's head scores during training (training_scores.hpp).
#include "training_scores.hpp"

#include <attnlab/nn/head_mask.hpp>
#include <attnlab/results/tensor.hpp>

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::trainers {
namespace {

/// Where the scores measured during training go: /head_scores/training/step_<s>.
constexpr const char* kTrainingScores = "head_scores/training";

/// 200 for "step_200"; nullopt for a name the trainer did not write.
std::optional<int64_t> step_of(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return std::nullopt;
  int64_t s = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || s > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    s = 10 * s + (name[i] - '0');
  }
  return s;
}

}  // namespace

int64_t head_scores_length(const TrainingScoresConfig& c, const data::Dataset& dataset) {
  return c.length > 0 ? c.length : std::max<int64_t>(1, dataset.info().num_steps / 2);
}

void TrainingScores::begin(int64_t step) {
  if (!on() || begun_) return;
  begun_ = true;
  // A resumed run: the scores after its checkpoint's step are the lost session's; step 0's are
  // measured by a run that begins.
  for (const auto& name : results_->children(kTrainingScores)) {
    if (const auto s = step_of(name); !s || *s > step) results_->remove(std::string(kTrainingScores) + "/" + name);
  }
  if (step == 0) measure(0);
}

void TrainingScores::after_step(int64_t step) {
  if (on() && step % c_.every == 0) measure(step);
}

double TrainingScores::take_seconds() {
  const double s = seconds_;
  seconds_ = 0;
  return s;
}

void TrainingScores::measure(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  if (!tokens_.defined()) {
    ids_ = train::ordinary_tokens(dataset_, lm_.vocab_size());
    tokens_ = train::repeated_random_tokens(c_.sequences, head_scores_length(c_, dataset_), ids_.low, ids_.high, 0);
  }
  auto scores = train::measure_heads(lm_, tokens_, device_);
  const nn::HeadMask* trained = nn::active_head_mask();
  if (trained != nullptr) train::blank_heads_off(scores, *trained);
  const auto at = fmt::format("{}/step_{}", kTrainingScores, step);
  train::write_head_scores(*results_, at, scores,
                           {.sequences = c_.sequences,
                            .length = tokens_.size(1) / 2,
                            .seed = 0,
                            .ids = ids_,
                            .checkpoint = "",
                            .device = device_.str(),
                            .trained_head_mask = trained != nullptr ? std::string("interventions.head_mask") : ""});
  if (const auto rows = val_rows(); rows.numel() > 0) {  // the sink on the data too (Gu et al. 2024)
    auto on_val = train::measure_heads(lm_, rows, device_);
    if (trained != nullptr) train::blank_heads_off(on_val, *trained);
    results_->write_array(at + "/val_first_token_mass", results::to_float_array(on_val.first_token_mass.cpu()));
    results_->set_attr_at(at + "/val_first_token_mass", "definition",
                          fmt::format("first_token_mass on the first {} full rows of the first validation batch",
                                      rows.size(0)));
  }
  results_->set_attr_at(at, "step", step);
  results_->set_attr_at(kTrainingScores, "every", c_.every);
  results_->set_attr_at(kTrainingScores, "what",
                        std::string("runner heads' scores during training: step_<s> after s optimizer steps"));
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

torch::Tensor TrainingScores::val_rows() {
  if (val_rows_.defined()) return val_rows_;
  val_rows_ = torch::empty({0, 0}, torch::kLong);
  const auto val = dataset_.has_split(data::Split::Val) ? dataset_.batches(data::Split::Val, false, 0)
                                                        : std::vector<data::Batch>{};
  if (val.empty() || val.front().tgt_in.size(1) < 2) return val_rows_;
  const auto& b = val.front();
  const auto full = b.tgt_valid_lens.defined() && b.tgt_valid_lens.dim() == 1
                        ? b.tgt_in.index({b.tgt_valid_lens.eq(b.tgt_in.size(1))})
                        : b.tgt_in;  // [N, T]
  val_rows_ = full.narrow(0, 0, std::min(full.size(0), c_.sequences));
  return val_rows_;
}

}  // namespace attnlab::trainers
