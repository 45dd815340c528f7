#pragma once
// The epoch loop of every trainer (docs/PLUGINS.md, "A trainer: the epoch loop"). A trainer says what
// one step computes and what an epoch reports, through EpochHooks; run_epochs does the rest, the
// same for every trainer:
//   - epochs of global batches (the dataset's training split, shuffled by seed + epoch), every
//     step through TrainStep: the run's precision, gradient clipping, CUDA graphs when the
//     optimizer is FusedAdam, a learning-rate schedule (/metrics/step/lr when asked);
//   - data-parallel training under torchrun (TrainContext::distributed, docs/DISTRIBUTED.md):
//     rank 0's weights everywhere, each rank's contiguous part of every global batch, its summed
//     loss scaled so that the reducer's average is the global batch's gradient, the epoch's sums
//     added over the ranks, every rank stopping at the same step;
//   - stopping: a signal (TrainContext::stop) ends the fit at the next step, Interrupted; a train
//     loss that is not finite ends it Diverged, after its epoch is reported;
//   - checkpoints (LoopConfig): last.pt after every epoch, best.pt at the best selection metric,
//     epoch-<N>.pt of the last keep_checkpoints epochs; --resume continues from last.pt exactly
//     (model, optimizer, step count, RNG states; the data order depends on seed and epoch only);
//   - patience: the fit stops when the selection metric has not improved for that many epochs.
#include <attnlab/config/binding.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/train/schedule.hpp>
#include <attnlab/train/train_step.hpp>
#include <attnlab/train/trainer.hpp>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::train {

/// The loop's options a trainer offers its users: its Config derives from LoopConfig, its binding
/// includes checkpoint_options() and patience_option().
struct LoopConfig {
  bool checkpoints = false;      // <results>.ckpt/last.pt every epoch and best.pt; needed for --resume
  int64_t keep_checkpoints = 0;  // also epoch-<N>.pt of the last K epochs (`runner average`)
  int64_t patience = 0;          // stop after this many epochs without a better selection metric; 0 = off
};

/// `checkpoints` and `keep_checkpoints` (for Binding::include); `best_is` says what picks best.pt
/// ("lowest validation loss"), `defaults` the trainer's defaults (checkpoints off unless given).
ATTNLAB_API config::Binding<LoopConfig> checkpoint_options(const std::string& best_is, LoopConfig defaults = {});
/// `patience`; `watched` names what it watches ("the best_by metric").
ATTNLAB_API config::Binding<LoopConfig> patience_option(const std::string& watched);
/// For the trainer's make(): keep_checkpoints without checkpoints is a ConfigError at its place.
ATTNLAB_API void check_loop_options(const LoopConfig& c, const config::Options& o);

/// Where a step's rows sit in its global batch, and how their loss is weighed.
struct StepShare {
  /// One process: the rows are the whole batch, and the trainer's loss is its objective as it
  /// always computes it (a mean, a sum). A data-parallel run: this rank's part, and the loss is the
  /// sum over its rows, which the loop multiplies by `scale` for the gradient.
  bool whole = true;
  int64_t begin = 0, end = 0;  // this rank's rows [begin, end) of the global batch
  double normalizer = 1.0;     // EpochHooks::normalizer of the global batch (at least 1)
  double scale = 1.0;          // world_size / normalizer: the reducer averages over the ranks
  /// False for a stand-in row (a batch with fewer rows than ranks leaves this rank none): it takes
  /// part in the step with scale 0, and after_step is not called.
  bool counts = true;
};

/// What EpochHooks::selection returns: the metric that picks best.pt and that patience watches.
struct Selection {
  std::string name;  // "val/loss", in messages
  double value = 0.0;
  bool higher_is_better = false;  // e.g. val/bleu; stored negated in TrainingState::best_metric
};

/// What end_epoch may ask of the loop.
class ATTNLAB_API EpochEnd {
 public:
  EpochEnd(std::chrono::steady_clock::time_point start, Distributed* distributed)
      : start_(start), distributed_(distributed) {}
  /// Seconds since the epoch began; read the device sums first, which waits for the device.
  double seconds() const;
  /// `values` added over the ranks of a data-parallel run (every rank gets the totals); the values
  /// themselves in one process.
  std::vector<double> sum(const std::vector<double>& values) const;

 private:
  std::chrono::steady_clock::time_point start_;
  Distributed* distributed_;
};

/// A trainer's part of the loop. Hooks are called in this order each epoch: begin_epoch, batches,
/// then per global batch normalizer (data-parallel runs), inputs, loss (inside the step),
/// after_step; then end_epoch and selection.
class ATTNLAB_API EpochHooks {
 public:
  virtual ~EpochHooks() = default;

  /// The module trained: what the optimizer steps, what checkpoints hold, what a data-parallel run
  /// broadcasts from rank 0 and attaches its gradient reducer to.
  virtual torch::nn::Module& module() = 0;

  /// The epoch's global batches, each one step (default: the dataset's training split, shuffled
  /// by seed + epoch). Every rank must return the same.
  virtual std::vector<data::Batch> batches(const TrainContext& ctx, int64_t epoch);
  /// As an epoch begins (default: module().train()).
  virtual void begin_epoch(int64_t epoch);
  /// What the objective divides a global batch's summed loss by: its tokens (a mean token loss),
  /// its values (a mean squared error); 1 (default) for an objective that is a sum already.
  virtual double normalizer(const data::Batch& global) const;

  /// The step's device tensors, from this rank's rows of the batch (on the CPU; the whole batch in
  /// one process). `graphed`: the step is captured as a CUDA graph, so pad to a few shapes
  /// (data::pad_to_bucket).
  virtual std::vector<torch::Tensor> inputs(const data::Batch& rows, const StepShare& share, bool graphed) = 0;
  /// The forward pass and loss on `in` (TrainStep::Body's rules: read only `in`, nothing back to
  /// the host): {the loss, any further 0-dim tensors to sum}. `summed` (a data-parallel run): the
  /// loss summed over the rows, which the loop scales; else the trainer's objective.
  virtual std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool summed) = 0;
  /// After each step: add its outputs (detached, on the device; `loss`'s, with outs[0] the
  /// objective in one process and the rows' summed loss in a data-parallel run) to the epoch's sums.
  virtual void after_step(const std::vector<torch::Tensor>& outs, const data::Batch& rows, const StepShare& share) = 0;

  /// After the epoch's steps: fill r.train (read the sums once; `end.sum` adds them over the
  /// ranks) and r.val. The loop sets r.epoch before and r.seconds after.
  virtual void end_epoch(EpochReport& r, const EpochEnd& end) = 0;
  /// The metric that picks best.pt and that patience watches (default: val/loss when reported,
  /// else train/loss; lower is better).
  virtual Selection selection(const EpochReport& r) const;
};

/// How a trainer runs the loop.
struct LoopOptions {
  std::string who;  // the trainer, in messages ("seq2seq")
  int64_t max_epochs = 1;
  LoopConfig loop = {};   // checkpoints, keep_checkpoints, patience
  StepOptions step = {};  // CUDA graphs, gradient clipping, precision
  /// Whether each epoch records TrainStep's cuda_graphs attributes (trainers with graph options).
  bool record_graphs = true;
  LrSchedule schedule = {};  // the learning rate at each step; LrSchedule{.lr = lr} is constant
  bool record_lr = false;    // /metrics/step/lr after every step
};

/// Trains `hooks.module()` with `optimizer` as above and reports every epoch through
/// ctx.on_epoch. `optimizer` may be any torch optimizer (CUDA graphs need FusedAdam), or null for
/// a trainer with nothing to train (each step then runs the loss alone, without gradients). A
/// data-parallel fit that completes checks that every rank holds the same module state (an Error
/// naming the rank when not).
ATTNLAB_API FitResult run_epochs(TrainContext& ctx, EpochHooks& hooks, torch::optim::Optimizer* optimizer,
                                 const LoopOptions& options);

}  // namespace attnlab::train
