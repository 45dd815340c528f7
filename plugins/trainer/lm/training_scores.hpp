#pragma once
// The lm trainer's head scores during training (trainer.head_scores_every): every head scored as
// `runner heads` does on the same repeated random tokens at step 0 and every N steps, and its
// first-token mass on validation rows, into /head_scores/training/step_<s>.
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/head_scores.hpp>

#include <torch/types.h>

#include <cstdint>

namespace attnlab::trainers {

struct TrainingScoresConfig {
  int64_t every = 0;      // head_scores_every
  int64_t length = 0;     // head_scores_length; 0 = half the dataset's sequence length
  int64_t sequences = 16;  // head_scores_sequences
};

/// Random tokens repeated once for the head scores: `length`, or half the dataset's sequence length.
int64_t head_scores_length(const TrainingScoresConfig& c, const data::Dataset& dataset);

class TrainingScores {
 public:
  TrainingScores(const TrainingScoresConfig& c, nn::LanguageModel& lm, const data::Dataset& dataset,
                 results::Results* results, torch::Device device)
      : c_(c), lm_(lm), dataset_(dataset), results_(results), device_(device) {}

  /// The first interval of this session, at `step`: drops the scores after it (a resumed run's lost
  /// session's) and measures step 0 when the run begins. Later calls do nothing.
  void begin(int64_t step);
  /// After optimizer step `step`: measures when it is a multiple of `every`.
  void after_step(int64_t step);
  /// Seconds spent measuring since the last call (left out of train/seconds); resets them.
  double take_seconds();

 private:
  bool on() const { return c_.every > 0 && results_ != nullptr; }
  /// Every head scored after `step` steps, written to /head_scores/training/step_<step>.
  void measure(int64_t step);
  /// tgt_in of up to `sequences` full rows of the first validation batch [N, T], drawn once;
  /// empty without a validation split.
  torch::Tensor val_rows();

  TrainingScoresConfig c_;
  nn::LanguageModel& lm_;
  const data::Dataset& dataset_;
  results::Results* results_;
  torch::Device device_;
  bool begun_ = false;
  double seconds_ = 0;
  torch::Tensor tokens_, val_rows_;
  train::TokenRange ids_;
};

}  // namespace attnlab::trainers
