#pragma once
// Plugin kind "trainer": fit() a model on a dataset, reporting each epoch to the results file
// through the context. The framework runs the experiment around it (results, samples, signals).
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/results/results.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace attnlab::train {

/// One epoch's numbers; keys become /metrics/<group>/<name>.
struct EpochReport {
  int64_t epoch = 0;                              // 1-based
  std::map<std::string, double> train, val;       // e.g. {"loss": ..., "tokens_per_s": ...}
  double seconds = 0.0;
};

struct TrainContext {
  nn::EncoderDecoder model{nullptr};
  data::Dataset* dataset = nullptr;
  torch::Device device = torch::kCPU;
  uint64_t seed = 0;
  /// Set by SIGINT/SIGTERM: finish the current step, report, and return.
  const std::atomic<bool>* stop = nullptr;
  /// Called after every epoch (appends metrics, flushes the file, prints progress).
  std::function<void(const EpochReport&)> on_epoch;
  bool stopped() const { return stop != nullptr && stop->load(); }
};

enum class FitResult { Completed, Interrupted, Diverged };

class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual FitResult fit(TrainContext& ctx) = 0;
  /// Epochs this trainer will run (for progress/ETA).
  virtual int64_t max_epochs() const = 0;
};

}  // namespace attnlab::train

template <>
struct attnlab::plugin::KindOf<attnlab::train::Trainer> {
  static constexpr const char* value = "trainer";
};
