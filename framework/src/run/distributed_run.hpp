#pragma once
// The parts of run::run_experiment that concern a data-parallel run under torchrun: joining the
// process group, training with one error per rank, checking the ranks agree, recording it all in
// the results file (docs/DISTRIBUTED.md).
#include <attnlab/config/node.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/model.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/trainer.hpp>

#include <memory>
#include <string>

namespace attnlab::run {

/// Joins the process group when torchrun started this runner with WORLD_SIZE > 1, else nullptr.
/// ConfigError, before anything is written, when the trainer (named by `trainer_node`) does not
/// train data-parallel or the device is not the CPU. Waits ATTNLAB_DISTRIBUTED_TIMEOUT seconds
/// (default 300) for the others, in joining and in every collective.
std::unique_ptr<train::Distributed> join_if_distributed(const train::DistributedEnv& env, const train::Trainer& trainer,
                                                 const config::Node& trainer_node, torch::Device device, bool quiet);

/// trainer.fit(tc); in a distributed run, a failure outside attnlab's own errors (a collective
/// whose peer died or timed out: c10d's and Gloo's exceptions) becomes one error naming the rank,
/// without c10d's backtrace.
train::FitResult fit_with(train::Trainer& trainer, train::TrainContext& tc);

/// Every rank must end training with the same weights: the reducer made their gradients equal.
/// Throws an Error naming the rank when they differ.
void check_ranks_agree(train::Distributed& dist, const nn::EncoderDecoder& model, const std::shared_ptr<nn::Model>& custom);

/// After training, the run's distributed_* attributes of how it went (docs/RESULTS.md): rows per
/// rank and how the gradient all-reduce overlapped backward (also logged unless `quiet`). World
/// size and backend are among the run's attributes (RunAttributes).
void record_distributed(results::Results& res, train::Distributed& dist, bool quiet);

}  // namespace attnlab::run
