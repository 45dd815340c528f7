#pragma once
// Plugin kind "trainer": fit() a model on a dataset, reporting each epoch to the results file
// through the context; fit() runs the framework's epoch loop (train/epoch_loop.hpp). The framework
// runs the experiment around it (run/: results, samples, signals).
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/model.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/precision.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace attnlab::train {

/// One epoch's numbers; keys become /metrics/<group>/<name>.
struct EpochReport {
  int64_t epoch = 0;                         // 1-based
  std::map<std::string, double> train, val;  // e.g. {"loss": ..., "tokens_per_s": ...}
  double seconds = 0.0;
};

/// What a trainer works on. The experiment's `model:` section decides which model is set:
/// `{encoder: ..., decoder: ...}` -> `model` (an EncoderDecoder); `{plugin: name, ...}` -> `custom`
/// (a "model" plugin); no model section -> neither, and the trainer builds what it needs from
/// `build` (e.g. a scorer for kernel regression).
struct TrainContext {
  nn::EncoderDecoder model{nullptr};
  std::shared_ptr<nn::Model> custom;
  /// Registry, device, seed and data sizes, for trainers that build their own modules.
  const plugin::BuildContext* build = nullptr;
  /// The run's results file: trainers may write extra series and tensors (predictions,
  /// attention) besides what on_epoch records. Always set by the runner.
  results::Results* results = nullptr;
  data::Dataset* dataset = nullptr;
  torch::Device device = torch::kCPU;
  /// The experiment's `precision:`: trainers wrap their forward pass and loss in
  /// AutocastScope(precision, device) (attnlab/train/precision.hpp; TrainStep does it for them).
  Precision precision = Precision::fp32;
  uint64_t seed = 0;
  /// Set by SIGINT/SIGTERM: finish the current step, report, and return.
  const std::atomic<bool>* stop = nullptr;
  /// Called after every epoch (appends metrics, flushes the file, prints progress).
  std::function<void(const EpochReport&)> on_epoch;
  /// Where the trainer keeps checkpoints (train/checkpoint.hpp): "<results>.ckpt", holding
  /// last.pt and best.pt; "" = write none. Set by the runner.
  std::string checkpoint_dir;
  /// `runner exp.yaml --resume RUN.h5`: continue from checkpoint_dir/last.pt (model, optimizer,
  /// schedule, RNG), cut ctx.results' series back to the checkpoint, train the remaining epochs.
  /// Only set for trainers whose can_resume() is true.
  bool resume = false;
  /// Set when the run is one of several data-parallel processes (torchrun; train/distributed.hpp),
  /// only for trainers whose supports_distributed() is true. Then `results` is set on rank 0
  /// alone, and checkpoints are written by rank 0 alone (writes_files()).
  Distributed* distributed = nullptr;
  bool stopped() const { return stop != nullptr && stop->load(); }
  /// Whether this process writes files: always, but on ranks other than 0 of a distributed run.
  bool writes_files() const { return distributed == nullptr || distributed->writes_files(); }
};

enum class FitResult { Completed, Interrupted, Diverged };

class Trainer {
 public:
  virtual ~Trainer() = default;
  /// Refuse, with a ConfigError saying what is needed, a model or dataset this trainer cannot
  /// train (e.g. no encoder + decoder for a seq2seq trainer). The runner calls it after building
  /// everything and before the results file exists, and adds the trainer's and the model's plugin
  /// names and the place in the experiment file to the message.
  virtual void check(const TrainContext& ctx) const {}
  virtual FitResult fit(TrainContext& ctx) = 0;
  /// Epochs this trainer will run (for progress/ETA).
  virtual int64_t max_epochs() const = 0;
  /// After a completed fit: trainer-specific evaluation (predictions, attention) written to
  /// ctx.results. The runner's `evaluate:` section (translation samples) runs after this.
  virtual void evaluate(TrainContext& ctx) {}
  /// Trainable parameters of whatever the trainer trains (0 if it has none of its own).
  virtual int64_t num_parameters(const TrainContext& ctx) const;
  /// Whether fit() honours TrainContext::resume (writes checkpoints and restores them exactly).
  virtual bool can_resume() const { return false; }
  /// Whether fit() honours TrainContext::distributed (trains on shards, reduces gradients and
  /// metrics through it): a trainer on the epoch loop (train::run_epochs) does. Other trainers
  /// refuse to run under torchrun with more than one process.
  virtual bool supports_distributed() const { return false; }
};

}  // namespace attnlab::train

template <>
struct attnlab::plugin::KindOf<attnlab::train::Trainer> {
  static constexpr const char* value = "trainer";
};
