#include <attnlab/train/experiment.hpp>

#include <attnlab/config/load.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/files.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/trainer.hpp>
#include <attnlab/train/translate.hpp>
#include <attnlab/version.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "train/distributed_run.hpp"
#include "train/evaluate.hpp"
#include "train/op_counts.hpp"
#include "train/progress.hpp"
#include "train/setup.hpp"

namespace attnlab::train {
namespace fs = std::filesystem;
using config::Node;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

/// Installs SIGINT/SIGTERM/SIGHUP handlers that ask the run to stop; restores the old ones.
/// Installed before the results file exists, so no signal can leave a file saying "running".
class SignalScope {
 public:
  SignalScope() {
    g_stop.store(false);
    for (size_t i = 0; i < kSignals.size(); ++i) old_[i] = std::signal(kSignals[i], on_signal);
  }
  ~SignalScope() {
    for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], old_[i]);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<void (*)(int), 3> old_{};
};

/// Fault injection for the tests of the signal paths: ATTNLAB_TEST_SIGNAL_AT=<point> sends this
/// process SIGTERM at that point ("results_created": just after the results file is created;
/// "evaluate_split": as the split evaluation starts), where a real signal's timing is a race.
void test_signal_at(const char* point) {
  const char* at = std::getenv("ATTNLAB_TEST_SIGNAL_AT");
  if (at != nullptr && std::string(at) == point) std::raise(SIGTERM);
}

/// Tests of torchrun restarts: ATTNLAB_TEST_RANK_EXIT_AT_EPOCH=N makes a rank other than 0 of the
/// first attempt (TORCHELASTIC_RESTART_COUNT=0) die after epoch N, as a crashed worker would.
void test_exit_at_epoch(int64_t epoch) {
  const char* at = std::getenv("ATTNLAB_TEST_RANK_EXIT_AT_EPOCH");
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (at != nullptr && attempt != nullptr && std::string(attempt) == "0" && std::to_string(epoch) == at) {
    std::_Exit(3);
  }
}

/// Throws Interrupted when a signal asked the run to stop (between the phases after training).
void throw_if_stopped(const char* phase) {
  if (g_stop.load()) throw Interrupted(fmt::format("interrupted during {}", phase));
}

/// The first non-finite loss in an epoch's report ("val loss is nan at epoch 3"), or "".
std::string non_finite_loss(const EpochReport& r) {
  for (const auto* group : {&r.train, &r.val}) {
    for (const auto& [name, value] : *group) {
      if (name.ends_with("loss") && !std::isfinite(value)) {
        return fmt::format("{} {} is {} at epoch {}", group == &r.train ? "train" : "val", name, value, r.epoch);
      }
    }
  }
  return {};
}

/// The experiment name as a file name in results/: only ASCII letters, digits, '-', '_' and '.'
/// are kept (the rest, '/' included, become '_'), a leading '.' becomes '_', at most 100 bytes;
/// "" is "experiment". So `experiment: ../../etc/x` writes results/_._.._etc_x-<time>.h5.
std::string file_stem(const std::string& experiment) {
  std::string out;
  for (unsigned char ch : experiment.substr(0, 100)) {
    const bool keep = ch < 0x80 && (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.');
    out += keep ? static_cast<char>(ch) : '_';
  }
  if (!out.empty() && out.front() == '.') out.front() = '_';
  return out.empty() ? "experiment" : out;
}

std::string default_results_path(const std::string& experiment) {
  auto now = std::chrono::system_clock::now();
  auto stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
  const std::string stem = file_stem(experiment);
  auto path = fs::path("results") / fmt::format("{}-{}.h5", stem, stamp);
  std::error_code ec;  // a symlink loop at results/ is reported by name when the file is created
  for (int i = 2; fs::exists(path, ec); ++i) path = fs::path("results") / fmt::format("{}-{}-{}.h5", stem, stamp, i);
  return path.string();
}

/// The plugin named by a component node: a scalar name or a map's `plugin:`.
std::string plugin_name(const Node& node) {
  if (node.is_scalar()) return node.str();
  return node.is_map() && node.has("plugin") ? node.at("plugin").str() : std::string("?");
}

/// What the experiment's model section builds, for messages: "model 'x'", "encoder 'a' + decoder
/// 'b'" or "no model".
std::string describe_model(const Node& model) {
  if (model.has("plugin")) return fmt::format("model '{}'", plugin_name(model));
  if (model.has("encoder") || model.has("decoder")) {
    return fmt::format("encoder '{}' + decoder '{}'", model.has("encoder") ? plugin_name(model.at("encoder")) : "?",
                       model.has("decoder") ? plugin_name(model.at("decoder")) : "?");
  }
  return "no model";
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

/// Before anything is fetched or built: ResultsError naming `path` when it cannot be this run's
/// results file (for --resume an existing regular file, else a regular file or nothing yet) or its
/// checkpoint folder cannot be one (a symlink loop, a file, a FIFO there).
void check_results_path(const std::string& path, bool resume) {
  const auto why = files::problem(path, resume ? files::Want::File : files::Want::FileToWrite);
  ATTNLAB_CHECK(why.empty(), ResultsError, "{} {}: {}", resume ? "cannot resume" : "cannot write results file", path,
                why);
  const auto dir = checkpoint_dir(path);
  const auto dir_why = files::problem(dir, files::Want::DirectoryToMake);
  ATTNLAB_CHECK(dir_why.empty(), ResultsError, "checkpoint folder {} of results file {}: {}", dir, path, dir_why);
}

/// `--resume RUN.h5`: the file is this experiment's results file and its checkpoint exists.
/// Returns the stored resolved config.
std::string check_resumable(const std::string& path, const std::string& name, const RunOptions& ro,
                            const Trainer& trainer, const TrainContext& tc) {
  ATTNLAB_CHECK(!ro.results_path || *ro.results_path == path, ConfigError,
                "--resume {} continues that results file; --results {} names another", path, *ro.results_path);
  ATTNLAB_CHECK(trainer.can_resume(), ConfigError,
                "cannot resume {}: this experiment's trainer does not write resumable checkpoints", path);
  const auto [experiment, stored_config] = results::read_isolated(path, [&] {
    results::ResultsReader stored(path, results::ReadCheck::none);
    return std::pair{stored.attr_string("experiment"), stored.config()};
  });
  ATTNLAB_CHECK(experiment == name, ConfigError, "cannot resume {}: it holds experiment '{}', this is '{}'", path,
                experiment, name);
  const auto last = checkpoint_dir(path) + "/last.pt";
  const auto why = files::problem(last, files::Want::File);
  ATTNLAB_CHECK(why != "no such file", DataError, "cannot resume {}: no checkpoint {} (it is written after each epoch)",
                path, last);
  ATTNLAB_CHECK(why.empty(), DataError, "cannot resume {}: checkpoint {}: {}", path, last, why);
  // The model must fit the checkpoint: refused here, the results file is left exactly as it was.
  const torch::nn::Module* module = tc.model ? static_cast<const torch::nn::Module*>(tc.model.get())
                                             : static_cast<const torch::nn::Module*>(tc.custom.get());
  if (module != nullptr) {
    try {
      check_model_fits(last, *module);
    } catch (const DataError& e) {
      throw ConfigError(fmt::format("cannot resume {} with this experiment: {}", path, e.what()));
    }
  }
  return stored_config;
}

}  // namespace

config::Schema experiment_schema() {
  using namespace config;
  return {
      opt_string("experiment", std::nullopt, "experiment name (results file prefix)"),
      opt_string("description", "", "one line about the experiment"),
      opt_int("seed", 0, "seed for torch, data order and dropout", 0),
      opt_enum("device", "cpu", {"cpu", "cuda", "auto"}, "where to train: cpu, cuda, or auto (cuda when available)"),
      opt_enum("precision", "fp32", {"fp32", "tf32", "bf16"},
               "training arithmetic: fp32 (IEEE float32 everywhere), tf32 (float32 matmuls on TF32 tensor cores), "
               "bf16 (autocast to bfloat16 in the forward pass and loss; fp32 weights and Adam); "
               "attnlab/train/precision.hpp"),
      opt_string("threads", "0",
                 "intra-op CPU threads: N (capped at the cores), 0 = torch's default (one per core), or auto (one "
                 "thread below 250,000 parameters, else one per core; recorded as the threads attribute)"),
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

namespace {

/// A rank other than 0: it trains its shards and takes part in every collective, writes nothing,
/// and leaves the evaluation to rank 0. Errors leave as exceptions (exit 1, the runner prints them).
int run_rank(Trainer& trainer, TrainContext& tc, Distributed& dist, const nn::EncoderDecoder& model,
             const std::shared_ptr<nn::Model>& custom) {
  std::string diverged;
  tc.on_epoch = [&](const EpochReport& r) {  // the reduced numbers: every rank decides alike
    test_exit_at_epoch(r.epoch);
    if (diverged.empty()) {
      diverged = non_finite_loss(r);
      if (!diverged.empty()) g_stop.store(true);
    }
  };
  FitResult fit;
  try {
    fit = fit_with(trainer, tc);
  } catch (const Interrupted&) {
    return diverged.empty() ? 130 : 2;
  }
  if (fit == FitResult::Diverged || !diverged.empty()) return 2;
  if (fit == FitResult::Interrupted || g_stop.load()) return 130;
  check_ranks_agree(dist, model, custom);
  return 0;
}

}  // namespace

int run_experiment(const RunOptions& ro) {
  Node root = config::load_experiment(ro.experiment_path, ro.overrides);
  config::Options top(root, experiment_schema(), "the experiment", {});
  const auto name = top.get_string("experiment");
  const config::Options results_opts = results_options(top);
  auto eval_spec = parse_evaluate(top.node("evaluate"));

  if (ro.resume_path || ro.results_path || !results_opts.get_string("path").empty()) {
    check_results_path(ro.resume_path    ? *ro.resume_path
                       : ro.results_path ? *ro.results_path
                                         : results_opts.get_string("path"),
                       ro.resume_path.has_value());
  }

  const auto seed = static_cast<uint64_t>(top.get_int("seed"));
  Setup setup = build_setup(top, ro.plugin_dirs);
  plugin::Registry& registry = *setup.registry;
  const plugin::BuildContext& ctx = setup.ctx;
  auto& dataset = setup.dataset;
  nn::EncoderDecoder model = setup.model;
  std::shared_ptr<nn::Model> custom = setup.custom;
  auto trainer = registry.create<train::Trainer>(top.node("trainer"), ctx);
  if ((!eval_spec.samples.empty() || !eval_spec.split.empty()) && !model) {
    top.fail("evaluate", "translating samples or a split needs an encoder + decoder model");
  }
  TrainContext tc;
  tc.model = model;
  tc.custom = custom;
  tc.build = &ctx;
  tc.dataset = dataset.get();
  tc.device = ctx.device;
  tc.precision = parse_precision(top.get_string("precision"));
  apply_precision(tc.precision);
  tc.seed = seed;
  tc.stop = &g_stop;
  // The trainer-model-dataset contract, before anything is written: one error naming them all.
  try {
    trainer->check(tc);
  } catch (const ConfigError& e) {
    const Node& t = top.node("trainer");
    throw ConfigError(fmt::format("{}: trainer '{}' cannot train {} on dataset '{}': {} (at 'trainer')",
                                  t.location().str(), plugin_name(t), describe_model(top.node("model")),
                                  setup.dataset_name, e.what()));
  }
  const int64_t num_parameters = trainer->num_parameters(tc);
  const std::string threads_choice = settle_threads(top, num_parameters);

  // torchrun (WORLD_SIZE and the rest in the environment): join the process group before anything
  // is written (docs/DISTRIBUTED.md). Every rank has built the same dataset, model and trainer.
  int restart_count = 0;
  const auto denv = DistributedEnv::from_environment();
  if (denv) restart_count = denv->restart_count;
  std::unique_ptr<Distributed> dist =
      denv ? join_if_distributed(*denv, *trainer, top.node("trainer"), ctx.device, ro.quiet) : nullptr;
  tc.distributed = dist.get();

  // A torchrun restart (--max-restarts) of a run with a fixed results path continues the attempt
  // that failed from its last checkpoint, as --resume would; rank 0 decides for all.
  std::optional<std::string> resume_path = ro.resume_path;
  if (restart_count > 0 && !resume_path) {
    const std::string fixed = ro.results_path ? *ro.results_path : results_opts.get_string("path");
    std::string verdict;
    if (tc.writes_files() && !fixed.empty() && trainer->can_resume() &&
        files::problem(checkpoint_dir(fixed) + "/last.pt", files::Want::File).empty()) {
      verdict = fixed;
    }
    if (dist) verdict = dist->share(verdict);
    if (!verdict.empty()) {
      resume_path = verdict;
      if (!ro.quiet && tc.writes_files()) {
        spdlog::info("torchrun restart {}: resuming {} from its last checkpoint", restart_count, verdict);
      }
    }
  }

  // Everything is valid: from here on the run is recorded.
  std::string path = ro.results_path ? *ro.results_path : results_opts.get_string("path");
  std::string stored_config;
  if (resume_path) {
    path = *resume_path;
    stored_config = check_resumable(path, name, ro, *trainer, tc);
    tc.resume = true;
  }
  if (path.empty()) path = default_results_path(name);
  if (dist) path = dist->share(path);  // rank 0's choice (a default name holds the time)
  tc.checkpoint_dir = checkpoint_dir(path);
  SignalScope signals;  // before the file exists: a signal from here on ends the run "interrupted"
  if (!tc.writes_files()) return run_rank(*trainer, tc, *dist, model, custom);
  // The results file's writer lock is taken before it is created or opened: a second run on the
  // path of a live one is refused ("another run is writing FILE (pid N)") and touches nothing.
  auto res_ptr = resume_path ? std::make_unique<results::Results>(path, results::Results::Open::Existing)
                             : std::make_unique<results::Results>(path, name);
  results::Results& res = *res_ptr;
  test_signal_at("results_created");
  if (!resume_path && files::problem(tc.checkpoint_dir, files::Want::Directory).empty()) {
    // A new run in place of an old one: its checkpoints describe the run whose file was just
    // replaced, and evaluating its best.pt as this run's would be a lie.
    std::error_code ec;
    fs::remove_all(tc.checkpoint_dir, ec);
    ATTNLAB_CHECK(!ec, ResultsError, "cannot remove the previous run's checkpoints {}: {}", tc.checkpoint_dir,
                  ec.message());
    if (!ro.quiet) spdlog::info("removed the previous run's checkpoints {}", tc.checkpoint_dir);
  }
  if (resume_path) {
    res.set_status(results::Status::Running);
    res.set_attr("resume_command_line", ro.command_line);
    if (const auto stale = set_aside_evals(res); !stale.empty() && !ro.quiet) {
      spdlog::warn(
          "{}: moved {} to /eval_stale: they scored checkpoints this resume replaces; score the run again "
          "with `runner eval` when it ends",
          path, fmt::join(stale, ", "));
    }
    if (restart_count > 0) res.set_attr("torchrun_restart_count", static_cast<int64_t>(restart_count));
  } else {
    res.set_attr("command_line", ro.command_line);
  }
  res.set_attr("description", top.get_string("description"));
  res.set_attr("seed", static_cast<int64_t>(seed));
  res.set_attr("device", ctx.device.str());
  res.set_attr("precision", std::string(precision_name(tc.precision)));
  res.set_attr("attnlab_version", kVersion);
  res.set_attr("torch_version", kTorchVersion);
  res.set_attr("git_commit", git_commit());
  res.set_attr("experiment_file", ro.experiment_path);
  res.set_attr("plugins", registry.used());
  res.set_attr("num_parameters", num_parameters);
  res.set_attr("threads", static_cast<int64_t>(torch::get_num_threads()));
  if (!threads_choice.empty()) res.set_attr("threads_choice", threads_choice);
  record_distributed(res, dist.get(), /*trained=*/false);
  const auto config_yaml = config::to_yaml(resolved_config(top, registry));
  if (resume_path && config_yaml != stored_config && !ro.quiet) {
    spdlog::warn("resuming {} with a configuration that differs from the stored one; /config now holds the new one",
                 path);
  }
  res.write_config(config_yaml);
  dataset->write_results(res);  // the dataset's own data and figures
  res.flush();

  Progress progress(trainer->max_epochs(), ro.quiet);
  if (!ro.quiet) {
    spdlog::info("{}: {} parameters on {}, results -> {}", name, num_parameters, ctx.device.str(), path);
    if (!threads_choice.empty()) spdlog::info("threads {}", threads_choice);
  }
  tc.results = &res;
  const auto op_counter = OpCounter::from_environment();  // bench/run's op counts
  // Any loss that is not finite, train or validation, from any trainer, ends the run "diverged":
  // the epoch's numbers are kept, and the trainer is asked to stop as a signal would.
  std::string diverged;
  tc.on_epoch = [&](const EpochReport& r) {
    for (const auto& [k, v] : r.train) res.append_metric("train", k, v);
    for (const auto& [k, v] : r.val) res.append_metric("val", k, v);
    res.append_metric("epoch", "seconds", r.seconds);
    res.append_metric("epoch", "index", static_cast<double>(r.epoch));
    res.flush();
    if (op_counter) op_counter->epoch(r.epoch);
    progress.epoch(r);
    if (diverged.empty()) {
      diverged = non_finite_loss(r);
      if (!diverged.empty()) g_stop.store(true);
    }
  };
  const auto interrupted = [&](const std::string& why) {
    res.set_attr("interrupted_during", why);
    res.set_status(results::Status::Interrupted);
    if (!ro.quiet) spdlog::warn("{}; partial results in {}", why, path);
    return 130;
  };
  const auto failed = [&](const std::exception& e) {
    res.set_attr("error", message_without_backtrace(e));
    res.set_status(results::Status::Failed);
  };

  FitResult fit;
  try {
    fit = fit_with(*trainer, tc);
    record_distributed(res, dist.get(), /*trained=*/true, ro.quiet);
  } catch (const Interrupted& e) {
    if (diverged.empty()) return interrupted(e.what());
    fit = FitResult::Diverged;
  } catch (const std::exception& e) {
    failed(e);
    throw;
  }
  if (fit == FitResult::Diverged || !diverged.empty()) {
    res.set_attr("diverged", diverged.empty() ? std::string("train loss is not finite") : diverged);
    res.set_status(results::Status::Diverged);
    spdlog::error("training diverged ({}); results in {}", diverged.empty() ? "loss is not finite" : diverged, path);
    return 2;
  }
  if (fit == FitResult::Interrupted || g_stop.load()) return interrupted("interrupted during training");
  if (dist) {
    try {
      check_ranks_agree(*dist, model, custom);
      res.set_attr("distributed_weights_agree", static_cast<int64_t>(1));
    } catch (const std::exception& e) {
      failed(e);
      throw;
    }
  }
  try {
    trainer->evaluate(tc);
    throw_if_stopped("the trainer's evaluation");
    if (model) {
      evaluate(eval_spec, model, *dataset, res, ro.quiet);
      throw_if_stopped("translating the evaluate samples");
      test_signal_at("evaluate_split");
      evaluate_split(eval_spec, model, *dataset, res, tc.checkpoint_dir + "/best.pt", ro.quiet, &g_stop);
      throw_if_stopped("the split evaluation");
    }
  } catch (const Interrupted& e) {
    return interrupted(e.what());
  } catch (const std::exception& e) {
    failed(e);
    throw;
  }
  res.set_status(results::Status::Completed);
  if (!ro.quiet) spdlog::info("completed; results in {}", path);
  return 0;
}

}  // namespace attnlab::train
