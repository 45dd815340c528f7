// Registry, device, dataset and model from a validated experiment.
#include "train/setup.hpp"

#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>
#include <attnlab/train/experiment.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <thread>

namespace attnlab::train {
namespace {

torch::Device pick_device(const config::Options& opts) {
  const auto want = opts.get_string("device");
  if (want == "cpu") return torch::kCPU;
  if (want == "cuda") {
    if (!torch::cuda::is_available()) opts.fail("device", "device 'cuda' was asked for but no CUDA device is available");
    return torch::kCUDA;
  }
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

/// `threads`, capped at the machine's cores with a warning: torch starts every thread asked for,
/// and `threads: 100000` spent minutes doing so before training began.
void apply_threads(const config::Options& top) {
  const int64_t asked = top.get_int("threads");
  if (asked <= 0) return;
  const int64_t cores = std::max(1U, std::thread::hardware_concurrency());
  if (asked > cores) {
    spdlog::warn("{}: threads: {} is more than this machine's {} cores; using {}",
                 top.resolved().at("threads").where(), asked, cores, cores);
  }
  torch::set_num_threads(static_cast<int>(std::min(asked, cores)));
}

}  // namespace

Setup build_setup(const config::Options& top, const std::vector<std::string>& plugin_dirs) {
  Setup s;
  const auto seed = static_cast<uint64_t>(top.get_int("seed"));
  torch::manual_seed(seed);
  apply_threads(top);

  s.registry = std::make_unique<plugin::Registry>();
  for (const auto& d : plugin_dirs) s.registry->add_search_dir(d);
  s.registry->discover();

  s.ctx.registry = s.registry.get();
  s.ctx.device = pick_device(top);
  s.ctx.seed = static_cast<int64_t>(seed);
  s.ctx.data_dir = top.get_string("data_dir");

  s.dataset = s.registry->create<data::Dataset>(top.node("dataset"), s.ctx);
  s.dataset_name = top.node("dataset").at("plugin").str();
  try {
    s.dataset->prepare(s.ctx.data_dir);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(fmt::format("dataset '{}' failed to prepare: {}", s.dataset_name, e.what()));
  }
  s.ctx.data = s.dataset->info();
  // The model: an encoder + decoder pair, a "model" plugin, or nothing (the trainer builds it).
  const config::Node& model_node = top.node("model");
  if (model_node.has("plugin")) {
    s.custom = s.registry->create<nn::Model>(model_node, s.ctx);
    s.custom->to(s.ctx.device);
  } else if (model_node.size() > 0) {
    config::Options model_opts(model_node,
                               {config::opt_node("encoder", config::Type::Map, std::nullopt, "encoder plugin"),
                                config::opt_node("decoder", config::Type::Map, std::nullopt, "decoder plugin")},
                               "the model section (an encoder + decoder, or {plugin: <model>})", {});
    auto encoder = s.registry->create<nn::Encoder>(model_opts.node("encoder"), s.ctx);
    auto decoder = s.registry->create<nn::Decoder>(model_opts.node("decoder"), s.ctx);
    s.model = nn::EncoderDecoder(encoder, decoder);
    s.model->to(s.ctx.device);
  }
  return s;
}

Setup setup_experiment(const std::vector<std::string>& args, const std::vector<std::string>& plugin_dirs,
                       std::string& experiment) {
  ATTNLAB_CHECK(!args.empty(), ConfigError, "an experiment file is required");
  config::Node root = config::load_experiment(args[0], {args.begin() + 1, args.end()});
  config::Options top(root, experiment_schema(), "the experiment", {});
  experiment = top.get_string("experiment");
  return build_setup(top, plugin_dirs);
}

}  // namespace attnlab::train
