#include "run/distributed_run.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "core/env.hpp"
#include "run/setup.hpp"
#include "train/distributed_nccl.hpp"

namespace attnlab::run {
namespace {

std::vector<torch::Tensor> trained_state(const nn::EncoderDecoder& model, const std::shared_ptr<nn::Model>& custom) {
  std::vector<torch::Tensor> state;
  if (model) {
    for (const auto& p : model->parameters()) state.push_back(p);
    for (const auto& b : model->buffers()) state.push_back(b);
  } else if (custom) {
    for (const auto& p : custom->parameters()) state.push_back(p);
  }
  return state;
}

}  // namespace

std::unique_ptr<train::Distributed> join_if_distributed(const train::DistributedEnv& env, const train::Trainer& trainer,
                                                 const config::Node& trainer_node, torch::Device device, bool quiet) {
  if (env.world_size <= 1) return nullptr;  // WORLD_SIZE=1: one process, as without torchrun
  if (!trainer.supports_distributed()) {
    throw ConfigError(fmt::format(
        "{}: trainer '{}' does not train data-parallel, but this runner is rank {} of {} (WORLD_SIZE is set: "
        "torchrun); run it as one process (at 'trainer')",
        trainer_node.location().str(), plugin_name(trainer_node), env.rank, env.world_size));
  }
  ATTNLAB_CHECK(device.is_cpu() || train::nccl_built(), ConfigError,
                "a data-parallel run on {} needs NCCL, but this runner was built without it (CMake found no "
                "nccl.h of the torch wheel's nvidia-nccl package); train with device: cpu (Gloo), or rebuild",
                device.str());
  const double timeout = env::seconds("ATTNLAB_DISTRIBUTED_TIMEOUT", 1, 86400).value_or(300.0);
  auto dist = train::join_process_group(env, device, timeout);
  if (!quiet && dist->writes_files()) {
    spdlog::info("data-parallel: {} processes ({}), each on 1/{} of every batch", dist->world_size(), dist->backend(),
                 dist->world_size());
  }
  return dist;
}

train::FitResult fit_with(train::Trainer& trainer, train::TrainContext& tc) {
  if (tc.distributed == nullptr) return trainer.fit(tc);
  try {
    return trainer.fit(tc);
  } catch (const Error&) {  // attnlab's own (Interrupted among them): already say what happened
    throw;
  } catch (const std::exception& e) {
    std::string what = message_without_backtrace(e);
    const bool peer = what.find("onnection") != std::string::npos || what.find("imed out") != std::string::npos ||
                      what.find("timeout") != std::string::npos;
    throw Error(fmt::format("distributed run: rank {} of {} stopped in training: {}{}", tc.distributed->rank(),
                            tc.distributed->world_size(), what,
                            peer ? " (a collective with the other ranks failed: one of them died or failed, and its "
                                   "own output says why; a collective waits at most ATTNLAB_DISTRIBUTED_TIMEOUT s)"
                                 : ""));
  }
}

void check_ranks_agree(train::Distributed& dist, const nn::EncoderDecoder& model, const std::shared_ptr<nn::Model>& custom) {
  ATTNLAB_CHECK(dist.agree(trained_state(model, custom)), Error,
                "distributed run: the ranks' weights differ after training (rank {} of {}); the gradient "
                "all-reduce did not make their steps equal",
                dist.rank(), dist.world_size());
}

void record_distributed(results::Results& res, train::Distributed& dist, bool quiet) {
  res.set_attr("distributed_rows_per_rank", dist.max_shard_rows());
  const train::AllReduceStats s = dist.all_reduce_stats();
  res.set_attr("distributed_gradient_bytes", s.gradient_bytes);
  res.set_attr("distributed_buckets", s.buckets);
  res.set_attr("distributed_steps_timed", s.steps);
  res.set_attr("distributed_backward_seconds", s.backward);
  res.set_attr("distributed_all_reduce_seconds", s.all_reduce);
  res.set_attr("distributed_overlap_seconds", s.overlap);
  if (!quiet && s.steps > 0) {
    spdlog::info(
        "all-reduce: {:.1f} ms per step for {:.2f} MiB in {} bucket{}, {:.1f} ms of it during backward "
        "({:.1f} ms); {:.1f} ms exposed",
        s.all_reduce * 1e3, static_cast<double>(s.gradient_bytes) / (1 << 20), s.buckets, s.buckets == 1 ? "" : "s",
        s.overlap * 1e3, s.backward * 1e3, s.exposed() * 1e3);
  }
}

}  // namespace attnlab::run
