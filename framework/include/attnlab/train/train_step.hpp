#pragma once
// One optimizer step of a trainer: zero the gradients, forward pass and loss (under the run's
// precision), backward, gradient clipping, the optimizer at the step's learning rate (FusedAdam,
// or any torch optimizer). On CUDA, with FusedAdam, the whole step can be captured into a CUDA
// graph and replayed, one kernel launch from the host instead of hundreds (the small models this
// framework is about are bound by launching them):
//
//   cuda_graphs: auto | on | off      (a trainer option; auto = on for a one-process CUDA run)
//
// - One graph per input shape, captured the first time the shape comes, all in one memory pool;
//   after max_graphs shapes a new shape runs eagerly and is counted (`cuda_graph_eager_steps`).
//   Trainers whose batches vary in length pad them to a few bucket shapes first
//   (data::pad_batch_to_bucket).
// - The first step of a run is eager: it creates Adam's state and the gradient tensors (zeroed in
//   place from then on, so every graph reads and writes the same ones) and warms up cuBLAS.
// - The learning rate and Adam's step count are device tensors set before each replay: a schedule
//   advances without re-capture. Dropout draws from the CUDA generator's Philox offsets, which
//   every replay advances, so each replay draws fresh masks.
// - What the step returns (the loss and the trainer's other sums) is a copy, valid after the next
//   step too.
// - A capture that fails (an op that syncs with the host, say) stops the run under `on`; under
//   `auto` the run goes on eagerly, with a warning and the reason recorded.
// Validation, decoding and attention recording stay outside: they never go through TrainStep.
#include <attnlab/config/binding.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/precision.hpp>
#include <attnlab/train/trainer.hpp>

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attnlab::train {

enum class CudaGraphs { Auto, On, Off };

struct StepOptions {
  CudaGraphs graphs = CudaGraphs::Auto;
  int64_t max_graphs = 32;     // distinct input shapes captured; later new shapes run eagerly
  double gradient_clip = 0.0;  // global L2 norm; 0 = off
  Precision precision = Precision::fp32;
};

/// What a run's steps did (recorded by TrainStep::record).
struct StepStats {
  bool graphs = false;      // whether steps were captured at all
  int64_t steps = 0;        // every step
  int64_t captures = 0;     // graphs captured (distinct shapes)
  int64_t replays = 0;      // steps that were a replay
  int64_t eager_steps = 0;  // steps run eagerly while graphs were on (the first, odd shapes)
  int64_t odd_shapes = 0;   // of those, steps whose shape came after max_graphs
  std::string off_because;  // why graphs are off ("" when on)
};

class ATTNLAB_API TrainStep {
 public:
  /// The forward pass and the loss on `inputs` (device tensors, in the order given to run()):
  /// returns {the loss to minimise (0-dim), any further 0-dim tensors the trainer sums}.
  using Body = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>& inputs)>;

  /// `who` names the trainer in messages. `distributed`: a data-parallel run, which steps eagerly
  /// (`cuda_graphs: on` is then a ConfigError). Graphs need the optimizer to be FusedAdam (its
  /// learning rate and step count as device tensors); another optimizer (torch's SGD) steps
  /// eagerly, and `cuda_graphs: on` is then a ConfigError.
  TrainStep(const StepOptions& options, torch::Device device, torch::optim::Optimizer& optimizer,
            std::vector<torch::Tensor> params, std::string who, bool distributed = false);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  /// One step at learning rate `lr`; `before_backward` runs between the forward pass and backward
  /// (a distributed run's reducer). Returns the body's outputs, detached.
  std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& inputs, double lr, const Body& body,
                                 const std::function<void()>& before_backward = {});

  /// Whether steps are being captured (false once an `auto` capture failed).
  bool graphed() const;
  const StepStats& stats() const;
  /// Writes cuda_graphs (on/off), its reason, and the counts as attributes of `res`.
  void record(results::Results& res) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

ATTNLAB_API const std::vector<std::pair<std::string, CudaGraphs>>& cuda_graphs_choices();
ATTNLAB_API const char* cuda_graphs_help();

/// A trainer's graph options: its Config derives from this, and its binding adds them with
/// with_graph_options(); fit() hands them to TrainStep through step_options().
struct GraphConfig {
  CudaGraphs cuda_graphs = CudaGraphs::Auto;
  int64_t cuda_graph_limit = 32;  // StepOptions::max_graphs
  int64_t cuda_graph_pad = 8;     // token batches: lengths rounded up to a multiple of this
};

/// `cuda_graphs`, `cuda_graph_limit` and (for trainers that pad token batches to buckets)
/// `cuda_graph_pad` as options of a trainer whose Config derives from GraphConfig.
template <class T>
config::Binding<T>& with_graph_options(config::Binding<T>& binding,
                                       bool pads) requires std::is_base_of_v<GraphConfig, T> {
  binding.choice("cuda_graphs", &GraphConfig::cuda_graphs, cuda_graphs_choices(), cuda_graphs_help())
      .option("cuda_graph_limit", &GraphConfig::cuda_graph_limit,
              "most batch shapes captured as graphs; steps of further shapes run eagerly (counted as "
              "cuda_graph_odd_shape_steps)",
              {.min = 1, .max = 4096});
  if (pads) {
    binding.option("cuda_graph_pad", &GraphConfig::cuda_graph_pad,
                   "with graphs on, pad every batch to the largest batch's rows and its source and target lengths "
                   "to a multiple of this, so that few shapes (graphs) cover an epoch; the loss is unchanged",
                   {.min = 1, .max = 4096});
  }
  return binding;
}

/// StepOptions from a trainer's GraphConfig and the run.
inline StepOptions step_options(const GraphConfig& g, double gradient_clip, Precision precision) {
  return {.graphs = g.cuda_graphs,
          .max_graphs = g.cuda_graph_limit,
          .gradient_clip = gradient_clip,
          .precision = precision};
}

/// For Trainer::check(): `cuda_graphs: on` needs a CUDA device (a ConfigError before the run starts).
ATTNLAB_API void check_graph_options(const GraphConfig& g, const TrainContext& ctx);

}  // namespace attnlab::train
