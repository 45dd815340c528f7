// The epoch loop every trainer runs (attnlab/train/epoch_loop.hpp).
#include <attnlab/train/epoch_loop.hpp>

#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/precision.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

namespace attnlab::train {
namespace fs = std::filesystem;
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Where this process's rows of `global` are, and their weight (StepShare).
StepShare share_of(const data::Batch& global, const Distributed* dist, const EpochHooks& hooks) {
  StepShare share;
  share.end = global.size();
  if (dist == nullptr) return share;
  share.whole = false;
  const auto [begin, end] = dist->rows(global.size());
  if (begin == end) {  // none of this batch is ours: Distributed::shard gives a stand-in row
    share.counts = false;
    share.scale = 0.0;
    share.begin = 0;
    share.end = std::min<int64_t>(1, global.size());
    return share;
  }
  share.begin = begin;
  share.end = end;
  share.normalizer = std::max(hooks.normalizer(global), 1.0);
  share.scale = static_cast<double>(dist->world_size()) / share.normalizer;
  return share;
}

/// epoch-<epoch>.pt: the model's weights and the training state, no optimizer state (a third of
/// last.pt's size for Adam); epoch files older than the last `keep` epochs are removed, whatever
/// an earlier session of a resumed run kept.
void keep_epoch(const std::string& dir, int64_t epoch, int64_t keep, const torch::nn::Module& module,
                const TrainingState& st) {
  save_checkpoint(epoch_checkpoint_path(dir, epoch), module, nullptr, st);
  for (const auto& kept : kept_checkpoints(dir)) {
    if (kept.epoch > epoch - keep) continue;
    std::error_code ec;
    fs::remove(kept.path, ec);
    if (ec) spdlog::warn("could not remove the old checkpoint {}: {}", kept.path, ec.message());
  }
}

/// One step of `rows`: through TrainStep (backward and the optimizer), or the loss alone when
/// there is nothing to train. Returns the hooks' outputs, detached: in a data-parallel run the
/// rows' summed loss first, whose scaled copy was what backward differentiated.
std::vector<torch::Tensor> step(EpochHooks& hooks, TrainStep* stepper, const std::vector<torch::Tensor>& in, double lr,
                                const StepShare& share, Distributed* dist, const LoopOptions& o, torch::Device device) {
  if (stepper == nullptr) {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(o.step.precision, device);
    auto outs = hooks.loss(in, !share.whole);
    for (auto& t : outs) t = t.detach();
    return outs;
  }
  if (share.whole) {
    return stepper->run(in, lr, [&](const std::vector<torch::Tensor>& x) { return hooks.loss(x, false); });
  }
  const double scale = share.scale;
  auto outs = stepper->run(
      in, lr,
      [&](const std::vector<torch::Tensor>& x) {
        auto sums = hooks.loss(x, true);
        ATTNLAB_CHECK(!sums.empty() && sums[0].defined(), Error,
                      "trainer '{}': the step's loss must return the loss (one value) first", o.who);
        sums.insert(sums.begin(), sums[0] * scale);  // what the reducer averages: the global batch's gradient
        return sums;
      },
      [&] { dist->prepare_for_backward(); });
  outs.erase(outs.begin());
  return outs;
}

}  // namespace

config::Binding<LoopConfig> checkpoint_options(const std::string& best_is, LoopConfig defaults) {
  return config::Binding<LoopConfig>(defaults)
      .option("checkpoints", &LoopConfig::checkpoints,
              fmt::format("write <results>.ckpt/last.pt every epoch and best.pt ({}); needed for --resume", best_is))
      .option("keep_checkpoints", &LoopConfig::keep_checkpoints,
              "also keep the weights of the last K epochs as <results>.ckpt/epoch-<N>.pt, for `runner average "
              "RUN.h5 --last K` (0 = none; needs checkpoints: true)",
              {.min = 0});
}

config::Binding<LoopConfig> patience_option(const std::string& watched) {
  return config::Binding<LoopConfig>().option(
      "patience", &LoopConfig::patience,
      fmt::format("stop when {} has not improved for this many epochs (0 = train max_epochs)", watched), {.min = 0});
}

void check_loop_options(const LoopConfig& c, const config::Options& o) {
  if (c.keep_checkpoints > 0 && !c.checkpoints) {
    o.fail("keep_checkpoints",
           fmt::format("keep_checkpoints: {} keeps epoch checkpoints, but checkpoints: false writes "
                       "none: set checkpoints: true, or keep_checkpoints: 0",
                       c.keep_checkpoints));
  }
}

double EpochEnd::seconds() const { return seconds_since(start_); }

std::vector<double> EpochEnd::sum(const std::vector<double>& values) const {
  return distributed_ != nullptr ? distributed_->sum(values) : values;
}

std::vector<data::Batch> EpochHooks::batches(const TrainContext& ctx, int64_t epoch) {
  return ctx.dataset->batches(data::Split::Train, true, ctx.seed + static_cast<uint64_t>(epoch));
}

void EpochHooks::begin_epoch(int64_t) { module().train(); }

double EpochHooks::normalizer(const data::Batch&) const { return 1.0; }

Selection EpochHooks::selection(const EpochReport& r) const {
  if (const auto it = r.val.find("loss"); it != r.val.end()) return {"val/loss", it->second};
  const auto it = r.train.find("loss");
  return {"train/loss", it != r.train.end() ? it->second : std::numeric_limits<double>::quiet_NaN()};
}

FitResult run_epochs(TrainContext& ctx, EpochHooks& hooks, torch::optim::Optimizer* optimizer, const LoopOptions& o) {
  torch::nn::Module& module = hooks.module();
  const bool checkpointing = o.loop.checkpoints && !ctx.checkpoint_dir.empty();
  const auto last_path = (fs::path(ctx.checkpoint_dir) / "last.pt").string();
  const auto best_path = (fs::path(ctx.checkpoint_dir) / "best.pt").string();
  TrainingState st;
  if (ctx.resume) {
    st = load_checkpoint(last_path, module, optimizer);
    if (ctx.results != nullptr) ctx.results->truncate_metrics(st.metric_rows);
    if (ctx.writes_files()) spdlog::info("resuming after epoch {} (step {}) from {}", st.epoch, st.step, last_path);
  }
  // Data-parallel (torchrun): every rank starts from rank 0's weights, trains on its part of each
  // global batch, and the reducer averages the gradients during backward.
  Distributed* dist = ctx.distributed;
  const auto params = module.parameters();
  if (dist != nullptr && optimizer != nullptr) dist->attach(params, module.buffers());
  // Zeroing, the loss under the run's precision, backward, clipping, the optimizer: eagerly, or as
  // a replayed CUDA graph per batch shape (attnlab/train/train_step.hpp).
  std::optional<TrainStep> stepper;
  if (optimizer != nullptr) stepper.emplace(o.step, ctx.device, *optimizer, params, o.who, dist != nullptr);
  for (int64_t epoch = st.epoch + 1; epoch <= o.max_epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    hooks.begin_epoch(epoch);
    for (const auto& global : hooks.batches(ctx, epoch)) {
      if (dist != nullptr ? dist->should_stop(ctx.stopped()) : ctx.stopped()) return FitResult::Interrupted;
      const StepShare share = share_of(global, dist, hooks);
      const data::Batch rows = dist != nullptr ? dist->shard(global) : global;
      const auto in = hooks.inputs(rows, share, stepper && stepper->graphed());
      const double lr = o.schedule.at(++st.step);
      const auto outs = step(hooks, stepper ? &*stepper : nullptr, in, lr, share, dist, o, ctx.device);
      if (share.counts) hooks.after_step(outs, rows, share);
      if (o.record_lr && ctx.results != nullptr) ctx.results->append_metric("step", "lr", lr);
    }
    if (ctx.results != nullptr && stepper && o.record_graphs) stepper->record(*ctx.results);
    EpochReport r;
    r.epoch = epoch;
    hooks.end_epoch(r, EpochEnd(start, dist));
    r.seconds = seconds_since(start);
    if (ctx.on_epoch) ctx.on_epoch(r);
    if (const auto loss = r.train.find("loss"); loss != r.train.end() && !std::isfinite(loss->second)) {
      return FitResult::Diverged;
    }
    // The checkpoint follows the flushed metrics, so it never claims rows the file lacks.
    st.epoch = epoch;
    const Selection selected = hooks.selection(r);
    const double metric = selected.higher_is_better ? -selected.value : selected.value;  // lower is better
    const bool best = std::isfinite(metric) && metric < st.best_metric;
    if (best) {
      st.best_metric = metric;
      st.best_epoch = epoch;
    }
    if (checkpointing && ctx.writes_files()) {
      if (ctx.results != nullptr) st.metric_rows = ctx.results->metric_rows();
      // epoch-N.pt before last.pt: a run killed between the two redoes epoch N on resume.
      if (o.loop.keep_checkpoints > 0) keep_epoch(ctx.checkpoint_dir, epoch, o.loop.keep_checkpoints, module, st);
      save_checkpoint(last_path, module, optimizer, st);
      if (best) copy_checkpoint(last_path, best_path);
    }
    if (ctx.stopped()) return FitResult::Interrupted;
    if (o.loop.patience > 0 && epoch < o.max_epochs && epoch - st.best_epoch >= o.loop.patience) {
      if (ctx.writes_files()) {
        spdlog::info("stopping early after epoch {}: {} has not improved for {} epochs (best {:.4g} at epoch {})",
                     epoch, selected.name, o.loop.patience,
                     selected.higher_is_better ? -st.best_metric : st.best_metric, st.best_epoch);
      }
      if (ctx.results != nullptr) ctx.results->set_attr("stopped_early_after_epoch", epoch);
      break;
    }
  }
  if (dist != nullptr) {  // the reducer made every rank's steps the same: so are their weights
    auto state = params;
    for (const auto& b : module.buffers()) state.push_back(b);
    ATTNLAB_CHECK(dist->agree(state), Error,
                  "trainer '{}': the ranks' weights differ after training (rank {} of {}); the gradient all-reduce "
                  "did not make their steps equal",
                  o.who, dist->rank(), dist->world_size());
  }
  return FitResult::Completed;
}

}  // namespace attnlab::train
