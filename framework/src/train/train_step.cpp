// TrainStep: one optimizer step, eager or as a replayed CUDA graph (attnlab/train/train_step.hpp).
#include <attnlab/train/train_step.hpp>

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <optional>

namespace attnlab::train {

namespace {

/// What identifies a graph: every input's dtype and sizes.
std::string shape_key(const std::vector<torch::Tensor>& inputs) {
  std::string key;
  for (const auto& t : inputs) {
    key += fmt::format("{}[{}];", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ","));
  }
  return key;
}

std::vector<torch::Tensor> detached_copies(const std::vector<torch::Tensor>& outs) {
  std::vector<torch::Tensor> copies;
  copies.reserve(outs.size());
  for (const auto& t : outs) copies.push_back(t.detach().clone());
  return copies;
}

}  // namespace

struct TrainStep::Impl {
  struct Graph {
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    std::vector<torch::Tensor> inputs, outputs;  // static: copied into before, read after each replay
  };

  Impl(const StepOptions& o, torch::Device d, torch::optim::Optimizer& opt, std::vector<torch::Tensor> p,
       std::string w)
      : options(o), device(d), optimizer(opt), fused(dynamic_cast<FusedAdam*>(&opt)), params(std::move(p)),
        who(std::move(w)) {}

  StepOptions options;
  torch::Device device;
  torch::optim::Optimizer& optimizer;
  FusedAdam* fused;  // the optimizer when it is FusedAdam (graphs need it), else null
  std::vector<torch::Tensor> params;
  std::string who;
  StepStats stats;
  bool graphs = false;  // capturing and replaying
  bool device_scalars = false;
  bool warmed = false;
  torch::Tensor lr, step;  // what the captured Adam reads
  std::map<std::string, Graph> by_shape;
  std::optional<c10::cuda::CUDAStream> side;  // warm-up and every capture run on it
  at::cuda::MempoolId_t pool{0, 0};

  /// One step: zero the gradients, the body under the run's precision, backward, clipping, Adam.
  /// With `rate`, the eager step without graphs as the trainers always took it: gradients set to
  /// none, `before_backward` (a reducer), the learning rate as a number. Without it, the step a
  /// graph holds, run eagerly or under capture: gradients zeroed in place (the same tensors in
  /// every graph), Adam reading the learning rate and step count from device tensors.
  std::vector<torch::Tensor> once(const std::vector<torch::Tensor>& inputs, const Body& body,
                                  std::optional<double> rate = std::nullopt,
                                  const std::function<void()>& before_backward = {}) {
    if (rate) {
      // torch's zero_grad(true) detaches each gradient in place before dropping it: an op per
      // parameter tensor and step (92 a corners step) for a tensor nobody else holds.
      for (auto& group : optimizer.param_groups()) {
        for (auto& p : group.params()) p.mutable_grad().reset();
      }
    } else {
      optimizer.zero_grad(/*set_to_none=*/false);
    }
    std::vector<torch::Tensor> outs;
    {
      AutocastScope autocast(options.precision, device);
      outs = body(inputs);
    }
    check_outputs(outs);
    if (before_backward) before_backward();
    outs[0].backward();
    if (options.gradient_clip > 0) clip_grad_norm(params, options.gradient_clip);
    if (rate) {
      for (auto& group : optimizer.param_groups()) group.options().set_lr(*rate);
    }
    optimizer.step();
    for (auto& t : outs) t = t.detach();
    return outs;
  }

  void check_outputs(const std::vector<torch::Tensor>& outs) const {
    ATTNLAB_CHECK(!outs.empty() && outs[0].defined() && outs[0].numel() == 1, Error,
                  "trainer '{}': the step's body must return the loss (one value) first", who);
  }

  /// Runs `fn` on the side stream, ordered after the current stream's work and before its next.
  template <class F>
  auto on_side(F&& fn) {
    const auto current = c10::cuda::getCurrentCUDAStream(device.index());
    c10::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(*side);
    auto result = [&] {
      c10::cuda::CUDAStreamGuard guard(*side);
      return fn();
    }();
    c10::cuda::CUDAEvent done;
    done.record(*side);
    done.block(current);
    return result;
  }

  /// Captures the step for this shape; nullptr (with graphs turned off under `auto`) when the
  /// capture fails.
  Graph* capture(const std::string& key, const std::vector<torch::Tensor>& inputs, const Body& body) {
    Graph g;
    for (const auto& t : inputs) g.inputs.push_back(t.clone());
    g.graph = std::make_unique<at::cuda::CUDAGraph>();
    const int64_t steps_before = fused->steps_taken();
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);  // casts of the weights are part of the graph
    std::string failure;
    on_side([&] {
      try {
        g.graph->capture_begin(pool);
        g.outputs = once(g.inputs, body);
        g.graph->capture_end();
      } catch (const std::exception& e) {
        failure = e.what();
        abandon_capture();
      }
      return 0;
    });
    at::autocast::set_autocast_cache_enabled(cache);
    if (!failure.empty()) {
      (void)g.graph.release();  // half-made: its destructor would end a capture that has ended
      fused->set_step_count(steps_before);
      const auto first_line = failure.substr(0, failure.find('\n'));
      if (options.graphs == CudaGraphs::On) {
        throw Error(fmt::format(
            "trainer '{}': cuda_graphs: on, but capturing the training step as a CUDA graph failed ({}); the model "
            "or loss does something a graph cannot hold (a host sync such as .item(), a shape read from the data); "
            "train with cuda_graphs: off or auto",
            who, first_line));
      }
      stats.off_because = fmt::format("capture failed: {}", first_line);
      spdlog::warn("trainer '{}': could not capture the training step as a CUDA graph ({}); training eagerly", who,
                   first_line);
      graphs = false;
      stats.graphs = false;
      return nullptr;
    }
    ++stats.captures;
    return &by_shape.emplace(key, std::move(g)).first->second;
  }

  /// After a failed capture: end the stream's capture if it still runs, and give the allocator's
  /// routing to the graph pool back.
  void abandon_capture() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(side->stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(side->stream(), &partial);
      if (partial != nullptr) (void)cudaGraphDestroy(partial);
    }
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool);
    (void)cudaGetLastError();  // the capture's error is reported above, not by the next kernel
  }

  std::vector<torch::Tensor> graphed(const std::vector<torch::Tensor>& inputs, double rate, const Body& body) {
    lr.fill_(rate);
    step.fill_(static_cast<double>(fused->steps_taken() + 1));
    if (!warmed) {  // Adam's state, the gradients, cuBLAS's workspace on the side stream
      warmed = true;
      ++stats.eager_steps;
      return on_side([&] { return once(inputs, body); });
    }
    const auto key = shape_key(inputs);
    auto it = by_shape.find(key);
    Graph* g = it != by_shape.end() ? &it->second : nullptr;
    bool captured_now = false;
    if (g == nullptr && static_cast<int64_t>(by_shape.size()) < options.max_graphs) {
      g = capture(key, inputs, body);
      captured_now = g != nullptr;
      if (g == nullptr) {  // auto, and the capture failed: this step and the rest eagerly
        ++stats.eager_steps;
        return once(inputs, body);
      }
    }
    if (g == nullptr) {  // more shapes than graphs
      ++stats.eager_steps;
      ++stats.odd_shapes;
      return once(inputs, body);
    }
    if (!captured_now) {
      for (size_t i = 0; i < inputs.size(); ++i) g->inputs[i].copy_(inputs[i], /*non_blocking=*/true);
    }
    g->graph->replay();
    // The capture ran step() on the host once: its count is this replay's.
    if (!captured_now) fused->count_replayed_step();
    ++stats.replays;
    return detached_copies(g->outputs);
  }
};

TrainStep::TrainStep(const StepOptions& options, torch::Device device, torch::optim::Optimizer& optimizer,
                     std::vector<torch::Tensor> params, std::string who, bool distributed)
    : impl_(std::make_unique<Impl>(options, device, optimizer, std::move(params), std::move(who))) {
  auto& s = impl_->stats;
  if (options.graphs == CudaGraphs::Off) {
    s.off_because = "cuda_graphs: off";
  } else if (!device.is_cuda()) {
    ATTNLAB_CHECK(options.graphs != CudaGraphs::On, ConfigError,
                  "trainer '{}': cuda_graphs: on needs device: cuda, but this run trains on {}", impl_->who,
                  device.str());
    s.off_because = "not a CUDA device";
  } else if (distributed) {
    ATTNLAB_CHECK(options.graphs != CudaGraphs::On, ConfigError,
                  "trainer '{}': cuda_graphs: on is not supported in a data-parallel run (the reducer's all-reduce "
                  "runs outside a graph); use cuda_graphs: auto or off",
                  impl_->who);
    s.off_because = "data-parallel run";
  } else if (impl_->fused == nullptr) {
    ATTNLAB_CHECK(options.graphs != CudaGraphs::On, ConfigError,
                  "trainer '{}': cuda_graphs: on needs the optimizer to be train::FusedAdam (its learning rate "
                  "and step count on the device), but this trainer's is another; use cuda_graphs: auto or off",
                  impl_->who);
    s.off_because = "the optimizer is not FusedAdam";
  } else {
    impl_->graphs = true;
    s.graphs = true;
    const auto f32 = torch::TensorOptions(torch::kFloat32).device(device);
    impl_->lr = torch::zeros({}, f32);
    impl_->step = torch::zeros({}, f32);
    impl_->fused->use_device_scalars(impl_->lr, impl_->step);
    impl_->device_scalars = true;
    impl_->side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    impl_->pool = at::cuda::graph_pool_handle();
  }
}

TrainStep::~TrainStep() = default;

std::vector<torch::Tensor> TrainStep::run(const std::vector<torch::Tensor>& inputs, double lr, const Body& body,
                                          const std::function<void()>& before_backward) {
  auto& im = *impl_;
  ++im.stats.steps;
  if (im.graphs) return im.graphed(inputs, lr, body);
  if (im.device_scalars) {  // graphs were on and a capture failed: same tensors, eagerly
    im.lr.fill_(lr);
    im.step.fill_(static_cast<double>(im.fused->steps_taken() + 1));
    ++im.stats.eager_steps;
    return im.once(inputs, body);
  }
  return im.once(inputs, body, lr, before_backward);
}

bool TrainStep::graphed() const { return impl_->graphs; }

const StepStats& TrainStep::stats() const { return impl_->stats; }

void TrainStep::record(results::Results& res) const {
  const auto& s = impl_->stats;
  res.set_attr("cuda_graphs", std::string(s.graphs ? "on" : "off"));
  if (!s.off_because.empty()) res.set_attr("cuda_graphs_off_because", s.off_because);
  if (!impl_->device_scalars) return;
  res.set_attr("cuda_graph_captures", s.captures);
  res.set_attr("cuda_graph_replays", s.replays);
  res.set_attr("cuda_graph_eager_steps", s.eager_steps);
  res.set_attr("cuda_graph_odd_shape_steps", s.odd_shapes);
}

const std::vector<std::pair<std::string, CudaGraphs>>& cuda_graphs_choices() {
  static const std::vector<std::pair<std::string, CudaGraphs>> choices = {
      {"auto", CudaGraphs::Auto}, {"on", CudaGraphs::On}, {"off", CudaGraphs::Off}};
  return choices;
}

const char* cuda_graphs_help() {
  return "capture the whole training step (forward, loss, backward, clipping, Adam) as a CUDA graph per batch shape "
         "and replay it: auto = on for a one-process CUDA run (eager if a capture fails), on (a failed capture is an "
         "error), off (attnlab/train/train_step.hpp)";
}

void check_graph_options(const GraphConfig& g, const TrainContext& ctx) {
  ATTNLAB_CHECK(g.cuda_graphs != CudaGraphs::On || ctx.device.is_cuda(), ConfigError,
                "cuda_graphs: on captures the training step as a CUDA graph, which needs device: cuda, but this "
                "run trains on {} (cuda_graphs: auto is on for CUDA runs and off otherwise)",
                ctx.device.str());
}

}  // namespace attnlab::train
