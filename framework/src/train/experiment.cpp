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
      opt_node("model", Type::Map, std::nullopt, "model: {encoder: {plugin: ...}, decoder: {plugin: ...}}"),
      opt_node("trainer", Type::Map, std::nullopt, "trainer plugin and its options"),
      opt_node("evaluate", Type::Map, "{}", "after training: samples to translate, attention to record"),
      opt_node("results", Type::Map, "{}", "results file: {path: ...}"),
  };
}

int run_experiment(const RunOptions& ro) {
  Node root = config::load_experiment(ro.experiment_path, ro.overrides);
  config::Options top(root, experiment_schema(), "the experiment", {});
  const auto name = top.get_string("experiment");
  config::Options model_opts(top.node("model"),
                             {config::opt_node("encoder", config::Type::Map, std::nullopt, "encoder plugin"),
                              config::opt_node("decoder", config::Type::Map, std::nullopt, "decoder plugin")},
                             "the model section", {});
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
  auto encoder = registry.create<nn::Encoder>(model_opts.node("encoder"), ctx);
  auto decoder = registry.create<nn::Decoder>(model_opts.node("decoder"), ctx);
  nn::EncoderDecoder model(encoder, decoder);
  model->to(ctx.device);
  auto trainer = registry.create<train::Trainer>(top.node("trainer"), ctx);

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
  res.set_attr("num_parameters", model->num_parameters());
  res.write_config(config::to_yaml(root));
  res.flush();

  Progress progress(trainer->max_epochs(), ro.quiet);
  if (!ro.quiet) {
    spdlog::info("{}: {} parameters on {}, results -> {}", name, model->num_parameters(), ctx.device.str(), path);
  }
  SignalScope signals;
  TrainContext tc;
  tc.model = model;
  tc.dataset = dataset.get();
  tc.device = ctx.device;
  tc.seed = seed;
  tc.stop = &g_stop;
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
    evaluate(eval_spec, model, *dataset, res, ro.quiet);
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
