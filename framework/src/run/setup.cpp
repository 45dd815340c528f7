// Registry, device, dataset and model from a validated experiment.
#include "run/setup.hpp"

#include "run/evaluate.hpp"
#include "run/sections.hpp"

#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>
#include <attnlab/run/experiment.hpp>
#include <attnlab/train/trainer.hpp>

#include <attnlab/train/distributed.hpp>

#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <thread>

namespace attnlab::run {
namespace {

/// cpu, cuda or auto. A process of a data-parallel run (torchrun: WORLD_SIZE > 1) takes the GPU
/// cuda:LOCAL_RANK and makes it current; auto then means CUDA when this machine has a GPU for each
/// of its processes (LOCAL_WORLD_SIZE), so every rank decides alike.
torch::Device pick_device(const config::Options& top) {
  const std::string want = experiment_config(top).device;
  const auto fail = [&](const std::string& message) { experiment_binding().fail(top, &ExperimentConfig::device, message); };
  if (want == "cpu") return torch::kCPU;
  const auto denv = train::DistributedEnv::from_environment();
  const bool ranks = denv && denv->world_size > 1;
  const int64_t gpus = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  if (want == "cuda" && gpus == 0) fail("device 'cuda' was asked for but no CUDA device is available");
  if (!ranks) return gpus > 0 ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  int64_t local_ranks = denv->local_rank + 1;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) local_ranks = std::max<int64_t>(local_ranks, std::atoll(v));
  if (want == "auto" && gpus < local_ranks) return torch::kCPU;
  if (denv->local_rank >= gpus) {
    fail(fmt::format("this process is LOCAL_RANK={} of a data-parallel run, but this machine has {} "
                                    "CUDA device{}: each process of a CUDA run needs a GPU of its own (NCCL cannot "
                                    "put two ranks on one device); start at most {} process{} per machine "
                                    "(torchrun --nproc_per_node={}), or train with device: cpu",
                                    denv->local_rank, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "es", gpus));
  }
  const auto index = static_cast<c10::DeviceIndex>(denv->local_rank);
  c10::cuda::set_device(index);  // what a bare `cuda` tensor or stream of this process means from now on
  return {torch::kCUDA, index};
}

int64_t cores() { return std::max(1U, std::thread::hardware_concurrency()); }

/// `threads` as a number, or nullopt for auto; a ConfigError at its place for anything else.
std::optional<int64_t> asked_threads(const config::Options& top) {
  const std::string text = experiment_config(top).threads;
  if (text == "auto") return std::nullopt;
  int64_t n = -1;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (err != std::errc() || end != text.data() + text.size() || n < 0) {
    experiment_binding().fail(top, &ExperimentConfig::threads,
                              fmt::format("expected a number of threads (0 = one per core) or auto, found '{}'", text));
  }
  return n;
}

/// `threads`, capped at the machine's cores with a warning: torch starts every thread asked for,
/// and `threads: 100000` spent minutes doing so before training began. auto waits for the model
/// (settle_threads).
void apply_threads(const config::Options& top) {
  const auto asked_or_auto = asked_threads(top);
  if (!asked_or_auto || *asked_or_auto <= 0) return;
  const int64_t asked = *asked_or_auto;
  const int64_t cores = run::cores();
  if (asked > cores) {
    const auto& where = top.resolved().at(experiment_binding().name_of(&ExperimentConfig::threads)).where();
    spdlog::warn("{}: threads: {} is more than this machine's {} cores; using {}", where, asked, cores, cores);
  }
  torch::set_num_threads(static_cast<int>(std::min(asked, cores)));
}

/// "num_hiddens=32, num_layers=2, ..." : the scalar options a plugin was built with.
std::string scalar_options(const plugin::Registry& registry, const std::string& path) {
  for (const auto& r : registry.resolved()) {
    if (r.path() != path) continue;
    std::vector<std::string> parts;
    for (const auto& key : r.keys()) {
      if (key != "plugin" && r.at(key).is_scalar()) parts.push_back(fmt::format("{}={}", key, r.at(key).str()));
    }
    return fmt::format("'{}' ({})", r.has("plugin") ? r.at("plugin").str() : "?", fmt::join(parts, ", "));
  }
  return "?";
}

/// One teacher-forced forward of a 1-sentence batch (eval mode, no gradient, no randomness drawn):
/// an encoder and a decoder that do not fit together (a GRU decoder of 16 hiddens after an encoder
/// of 32) fail here, at build time, with one error naming both and their options, not mid-run.
void check_fits_together(nn::EncoderDecoder& model, const plugin::BuildContext& ctx, const plugin::Registry& registry,
                         const config::Node& model_node) {
  const bool training = model->is_training();
  model->eval();
  try {
    torch::NoGradGuard no_grad;
    const auto ids = torch::TensorOptions().dtype(torch::kLong).device(ctx.device);
    const int64_t bos = std::max<int64_t>(ctx.data.bos_id, 0);
    auto src = torch::zeros({1, 2}, ids);
    auto tgt = torch::full({1, 2}, bos, ids);
    auto valid = torch::full({1}, 2, ids);
    model->forward(src, valid, tgt);
  } catch (const std::exception& e) {
    model->train(training);
    throw ConfigError(fmt::format("{}: encoder {} and decoder {} do not fit together: {} (at '{}')",
                                  model_node.location().str(), scalar_options(registry, model_node.path() + ".encoder"),
                                  scalar_options(registry, model_node.path() + ".decoder"),
                                  message_without_backtrace(e), model_node.path()));
  }
  model->train(training);
}

/// The model section as an encoder + decoder pair.
config::Options encoder_decoder_options(const config::Node& model_node) {
  return config::Options(model_node, model_pair_binding().schema(),
                         "the model section (an encoder + decoder, or {plugin: <model>})", std::vector<std::string>{});
}

}  // namespace

void validate_sections(const config::Options& top, const plugin::Registry& registry) {
  const ExperimentConfig e = experiment_config(top);
  registry.validate<data::Dataset>(e.dataset);
  if (e.model.has("plugin")) {
    registry.validate<nn::Model>(e.model);
  } else if (e.model.size() > 0) {
    const ModelPairConfig pair = model_pair_binding().read(encoder_decoder_options(e.model));
    registry.validate<nn::Encoder>(pair.encoder);
    registry.validate<nn::Decoder>(pair.decoder);
  }
  registry.validate<train::Trainer>(e.trainer);
}

void validate_experiment(const config::Node& root, const plugin::Registry& registry) {
  config::Options top(root, experiment_schema(), "the experiment", {});
  results_config(top);
  parse_evaluate(experiment_config(top).evaluate);
  head_mask_spec(top);
  validate_sections(top, registry);
}

std::string plugin_name(const config::Node& node) {
  if (node.is_scalar()) return node.str();
  return node.is_map() && node.has("plugin") ? node.at("plugin").str() : std::string("?");
}

HeadMaskSpec head_mask_spec(const config::Options& top) {
  const config::Options opts(experiment_config(top).interventions, interventions_binding().schema(),
                             "the interventions section", {});
  return head_mask_from_node(interventions_binding().read(opts).head_mask);
}

ResultsConfig results_config(const config::Options& top) {
  const config::Options opts(experiment_config(top).results, results_binding().schema(), "the results section", {});
  return results_binding().read(opts);
}

Setup build_setup(const config::Options& top, const std::vector<std::string>& plugin_dirs) {
  const ExperimentConfig e = experiment_config(top);
  Setup s;
  const auto seed = static_cast<uint64_t>(e.seed);
  torch::manual_seed(seed);
  apply_threads(top);

  s.registry = std::make_unique<plugin::Registry>();
  for (const auto& d : plugin_dirs) s.registry->add_search_dir(d);
  s.registry->discover();

  s.ctx.registry = s.registry.get();
  s.ctx.device = pick_device(top);
  s.ctx.seed = static_cast<int64_t>(seed);
  s.ctx.data_dir = e.data_dir;

  // Every plugin section is checked (plugin found, options valid) before the dataset fetches or
  // reads anything: a typo in `trainer:` must not wait for a download, or fail on it first.
  validate_sections(top, *s.registry);
  std::optional<config::Options> model_opts;
  if (!e.model.has("plugin") && e.model.size() > 0) model_opts.emplace(encoder_decoder_options(e.model));

  s.dataset = s.registry->create<data::Dataset>(e.dataset, s.ctx);
  s.dataset_name = e.dataset.at("plugin").str();
  try {
    s.dataset->prepare(s.ctx.data_dir);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    throw DataError(fmt::format("dataset '{}' failed to prepare: {}", s.dataset_name, ex.what()));
  }
  s.ctx.data = s.dataset->info();
  // The model: an encoder + decoder pair, a "model" plugin, or nothing (the trainer builds it).
  if (e.model.has("plugin")) {
    s.custom = s.registry->create<nn::Model>(e.model, s.ctx);
    s.custom->to(s.ctx.device);
  } else if (model_opts) {
    const auto& pairing = model_pair_binding();
    const ModelPairConfig pair = pairing.read(*model_opts);
    auto encoder = s.registry->create<nn::Encoder>(pair.encoder, s.ctx);
    auto decoder = s.registry->create<nn::Decoder>(pair.decoder, s.ctx);
    s.model = nn::EncoderDecoder(encoder, decoder);
    if (pair.share_embeddings) {
      if (!s.ctx.data.shared_vocab) {
        pairing.fail(*model_opts, &ModelPairConfig::share_embeddings,
                     fmt::format("one embedding for source and target needs one vocabulary, but dataset '{}' "
                                 "has two (source {} tokens, target {}): give the dataset one (multi30k: "
                                 "shared_vocab: true)",
                                 s.dataset_name, s.ctx.data.src_vocab_size, s.ctx.data.tgt_vocab_size));
      }
      try {
        s.model->share_token_embeddings();
      } catch (const ConfigError& ex) {
        pairing.fail(*model_opts, &ModelPairConfig::share_embeddings, ex.what());
      }
    }
    s.model->to(s.ctx.device);
    check_fits_together(s.model, s.ctx, *s.registry, e.model);
  }
  return s;
}

std::string settle_threads(const config::Options& top, int64_t num_parameters) {
  if (asked_threads(top)) return "";
  // Under torchrun the processes on this machine share its cores.
  int64_t local_ranks = 1;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) local_ranks = std::max<int64_t>(1, std::atoll(v));
  const int64_t n = num_parameters < kAutoThreadsParameters ? 1 : std::max<int64_t>(1, cores() / local_ranks);
  torch::set_num_threads(static_cast<int>(n));
  return fmt::format("auto: {} parameters, {} {}: {} thread{}", num_parameters,
                     num_parameters < kAutoThreadsParameters ? "below" : "at least", kAutoThreadsParameters, n,
                     n == 1 ? "" : "s");
}

Setup setup_experiment(const std::vector<std::string>& args, const std::vector<std::string>& plugin_dirs,
                       std::string& experiment) {
  ATTNLAB_CHECK(!args.empty(), ConfigError, "an experiment file is required");
  config::Node root = config::load_experiment(args[0], {args.begin() + 1, args.end()});
  config::Options top(root, experiment_schema(), "the experiment", {});
  experiment = experiment_config(top).experiment;
  return build_setup(top, plugin_dirs);
}

}  // namespace attnlab::run
