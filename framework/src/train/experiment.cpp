#include <attnlab/train/experiment.hpp>

#include <attnlab/config/load.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/trainer.hpp>
#include <attnlab/version.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>

#include "train/evaluate.hpp"
#include "train/progress.hpp"

namespace attnlab::train {
namespace fs = std::filesystem;
using config::Node;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

/// Installs SIGINT/SIGTERM handlers that ask the trainer to stop; restores the old ones.
class SignalScope {
 public:
  SignalScope() {
    g_stop.store(false);
    old_int_ = std::signal(SIGINT, on_signal);
    old_term_ = std::signal(SIGTERM, on_signal);
  }
  ~SignalScope() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

torch::Device pick_device(const config::Options& opts) {
  const auto want = opts.get_string("device");
  if (want == "cpu") return torch::kCPU;
  if (want == "cuda") {
    if (!torch::cuda::is_available()) opts.fail("device", "device 'cuda' was asked for but no CUDA device is available");
    return torch::kCUDA;
  }
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

std::string default_results_path(const std::string& experiment) {
  auto now = std::chrono::system_clock::now();
  auto stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
  auto path = fs::path("results") / fmt::format("{}-{}.h5", experiment, stamp);
  for (int i = 2; fs::exists(path); ++i) path = fs::path("results") / fmt::format("{}-{}-{}.h5", experiment, stamp, i);
  return path.string();
}

std::string git_commit() {
  std::string out;
  if (FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[64];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

/// The experiment as it ran: the file after defaults and overrides, with every framework and
/// plugin default filled in (each plugin's resolved options placed at its YAML path).
Node resolved_config(const config::Options& top, const plugin::Registry& registry) {
  Node root = top.resolved();
  for (const auto& r : registry.resolved()) {
    Node* at = &root;
    std::string path = r.path();
    size_t start = 0;
    while (true) {
      size_t dot = path.find('.', start);
      std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (dot == std::string::npos) {
        at->set(key, r);
        break;
      }
      Node* next = at->find(key);
      if (next == nullptr || !next->is_map()) next = &at->set(key, Node::map());
      at = next;
      start = dot + 1;
    }
  }
  root.repath("");
  return root;
}

}  // namespace

config::Schema experiment_schema() {
  using namespace config;
  return {
      opt_string("experiment", std::nullopt, "experiment name (results file prefix)"),
      opt_string("description", "", "one line about the experiment"),
      opt_int("seed", 0, "seed for torch, data order and dropout", 0),
      opt_enum("device", "cpu", {"cpu", "cuda", "auto"}, "where to train: cpu, cuda, or auto (cuda when available)"),
      opt_int("threads", 0, "intra-op CPU threads (0 = torch's default, one per core)", 0),
      opt_string("data_dir", "datasets", "where datasets are fetched to and read from"),
      opt_node("dataset", Type::Map, std::nullopt, "dataset plugin and its options ({plugin: name, ...})"),
      opt_node("model", Type::Map, "{}",
               "{encoder: {plugin: ...}, decoder: {plugin: ...}}, or {plugin: <model plugin>, ...}, or {} when "
               "the trainer builds its own model"),
      opt_node("trainer", Type::Map, std::nullopt, "trainer plugin and its options"),
      opt_node("evaluate", Type::Map, "{}", "after training: samples to translate, attention to record"),
      opt_node("results", Type::Map, "{}", "results file: {path: ...}"),
  };
}

int run_experiment(const RunOptions& ro) {
  Node root = config::load_experiment(ro.experiment_path, ro.overrides);
  config::Options top(root, experiment_schema(), "the experiment", {});
  const auto name = top.get_string("experiment");
  config::Options results_opts(top.node("results"),
                               {config::opt_string("path", "", "results file (default results/<experiment>-<time>.h5)")},
                               "the results section", {});
  auto eval_spec = parse_evaluate(top.node("evaluate"));

  const auto seed = static_cast<uint64_t>(top.get_int("seed"));
  torch::manual_seed(seed);
  if (top.get_int("threads") > 0) torch::set_num_threads(static_cast<int>(top.get_int("threads")));

  plugin::Registry registry;
  for (const auto& d : ro.plugin_dirs) registry.add_search_dir(d);
  registry.discover();

  plugin::BuildContext ctx;
  ctx.registry = &registry;
  ctx.device = pick_device(top);
  ctx.seed = static_cast<int64_t>(seed);
  ctx.data_dir = top.get_string("data_dir");

  auto dataset = registry.create<data::Dataset>(top.node("dataset"), ctx);
  const auto& dataset_name = top.node("dataset").at("plugin").str();
  try {
    dataset->prepare(ctx.data_dir);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(fmt::format("dataset '{}' failed to prepare: {}", dataset_name, e.what()));
  }
  ctx.data = dataset->info();
  // The model: an encoder + decoder pair, a "model" plugin, or nothing (the trainer builds it).
  nn::EncoderDecoder model{nullptr};
  std::shared_ptr<nn::Model> custom;
  const Node& model_node = top.node("model");
  if (model_node.has("plugin")) {
    custom = registry.create<nn::Model>(model_node, ctx);
    custom->to(ctx.device);
  } else if (model_node.size() > 0) {
    config::Options model_opts(model_node,
                               {config::opt_node("encoder", config::Type::Map, std::nullopt, "encoder plugin"),
                                config::opt_node("decoder", config::Type::Map, std::nullopt, "decoder plugin")},
                               "the model section (an encoder + decoder, or {plugin: <model>})", {});
    auto encoder = registry.create<nn::Encoder>(model_opts.node("encoder"), ctx);
    auto decoder = registry.create<nn::Decoder>(model_opts.node("decoder"), ctx);
    model = nn::EncoderDecoder(encoder, decoder);
    model->to(ctx.device);
  }
  auto trainer = registry.create<train::Trainer>(top.node("trainer"), ctx);
  if (!eval_spec.samples.empty() && !model) {
    top.fail("evaluate", "translation samples need an encoder + decoder model");
  }
  TrainContext tc;
  tc.model = model;
  tc.custom = custom;
  tc.build = &ctx;
  tc.dataset = dataset.get();
  tc.device = ctx.device;
  tc.seed = seed;
  tc.stop = &g_stop;
  const int64_t num_parameters = trainer->num_parameters(tc);

  // Everything is valid: from here on the run is recorded.
  std::string path = ro.results_path ? *ro.results_path : results_opts.get_string("path");
  if (path.empty()) path = default_results_path(name);
  results::Results res(path, name);
  res.set_attr("description", top.get_string("description"));
  res.set_attr("seed", static_cast<int64_t>(seed));
  res.set_attr("device", ctx.device.str());
  res.set_attr("attnlab_version", kVersion);
  res.set_attr("torch_version", kTorchVersion);
  res.set_attr("git_commit", git_commit());
  res.set_attr("command_line", ro.command_line);
  res.set_attr("experiment_file", ro.experiment_path);
  res.set_attr("plugins", registry.used());
  res.set_attr("num_parameters", num_parameters);
  res.write_config(config::to_yaml(resolved_config(top, registry)));
  res.flush();

  Progress progress(trainer->max_epochs(), ro.quiet);
  if (!ro.quiet) {
    spdlog::info("{}: {} parameters on {}, results -> {}", name, num_parameters, ctx.device.str(), path);
  }
  SignalScope signals;
  tc.results = &res;
  tc.on_epoch = [&](const EpochReport& r) {
    for (const auto& [k, v] : r.train) res.append_metric("train", k, v);
    for (const auto& [k, v] : r.val) res.append_metric("val", k, v);
    res.append_metric("epoch", "seconds", r.seconds);
    res.append_metric("epoch", "index", static_cast<double>(r.epoch));
    res.flush();
    progress.epoch(r);
  };

  FitResult fit;
  try {
    fit = trainer->fit(tc);
  } catch (const std::exception& e) {
    res.set_attr("error", e.what());
    res.set_status(results::Status::Failed);
    throw;
  }
  if (fit == FitResult::Interrupted) {
    res.set_status(results::Status::Interrupted);
    if (!ro.quiet) spdlog::warn("interrupted; partial results in {}", path);
    return 130;
  }
  if (fit == FitResult::Diverged) {
    res.set_status(results::Status::Diverged);
    spdlog::error("training diverged (loss is not finite); results in {}", path);
    return 2;
  }
  try {
    trainer->evaluate(tc);
    if (model) evaluate(eval_spec, model, *dataset, res, ro.quiet);
  } catch (const std::exception& e) {
    res.set_attr("error", e.what());
    res.set_status(results::Status::Failed);
    throw;
  }
  res.set_status(results::Status::Completed);
  if (!ro.quiet) spdlog::info("completed; results in {}", path);
  return 0;
}

}  // namespace attnlab::train
