// run_experiment as its phases: load and validate, build, join the process group, choose the
// results file, open it, record the run's attributes, fit, evaluate, finish (run/experiment.hpp).
#include <attnlab/run/experiment.hpp>

#include <attnlab/config/load.hpp>
#include <attnlab/files.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/trainer.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>

#include <memory>
#include <optional>

#include "config/json.hpp"
#include "run/distributed_run.hpp"
#include "run/evaluate.hpp"
#include "run/interventions.hpp"
#include "run/lifecycle.hpp"
#include "run/op_counts.hpp"
#include "run/progress.hpp"
#include "run/record.hpp"
#include "run/sections.hpp"
#include "run/setup.hpp"

namespace attnlab::run {
using config::Node;

namespace {

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

// ---- The phases' products, each phase's output the next one's input.

/// Phase 1: the experiment loaded and checked; nothing built, fetched or written.
struct Plan {
  config::Options top;     // the experiment after defaults and overrides, validated
  ExperimentConfig e;      // its top level, read
  std::string fixed_path;  // --results, else results.path, else "" (a default name is chosen later)
  EvalSpec eval;
  HeadMaskSpec head_mask;  // interventions.head_mask as written
};

/// Phase 2: everything the run trains with, built, and the trainer's check passed.
struct Built {
  Setup setup;  // first: its registry outlives the plugin objects below
  std::shared_ptr<train::Trainer> trainer;
  train::TrainContext tc;
  int64_t num_parameters = 0;
  std::string threads_choice;
  std::vector<nn::AttentionSite> sites;  // the model's attention modules (with a head mask)
  ResolvedHeadMask head_mask;            // empty: none
};

/// Phase 3: the process group under torchrun (null without), and where the run is recorded.
struct Group {
  std::unique_ptr<train::Distributed> dist;
  int restart_count = 0;                   // TORCHELASTIC_RESTART_COUNT
  std::optional<std::string> resume_path;  // --resume, or a torchrun restart's fixed path
  std::string path;                        // the results file, the same on every rank
  std::string stored_config;               // a resumed run's /config, as stored
};

/// `--resume RUN.h5`: the file is this experiment's results file and its checkpoint exists.
/// Returns the stored resolved config.
std::string check_resumable(const std::string& path, const std::string& name, const RunOptions& ro,
                            const train::Trainer& trainer, const train::TrainContext& tc) {
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
  const auto last = train::checkpoint_dir(path) + "/last.pt";
  const auto why = files::problem(last, files::Want::File);
  ATTNLAB_CHECK(why != "no such file", DataError, "cannot resume {}: no checkpoint {} (it is written after each epoch)",
                path, last);
  ATTNLAB_CHECK(why.empty(), DataError, "cannot resume {}: checkpoint {}: {}", path, last, why);
  // The model must fit the checkpoint: refused here, the results file is left exactly as it was.
  const torch::nn::Module* module = tc.model ? static_cast<const torch::nn::Module*>(tc.model.get())
                                             : static_cast<const torch::nn::Module*>(tc.custom.get());
  if (module != nullptr) {
    try {
      train::check_model_fits(last, *module);
    } catch (const DataError& e) {
      throw ConfigError(fmt::format("cannot resume {} with this experiment: {}", path, e.what()));
    }
  }
  return stored_config;
}

/// Phase 1. The experiment file with its overrides, the top level and the results and evaluate
/// sections validated, the results path checked.
Plan load_and_validate(const RunOptions& ro) {
  Node root = config::load_experiment(ro.experiment_path, ro.overrides);
  config::Options top(root, experiment_schema(), "the experiment", {});
  const ResultsConfig results = results_config(top);
  Plan plan{std::move(top), {}, "", {}, {}};
  plan.e = experiment_config(plan.top);
  plan.eval = parse_evaluate(plan.e.evaluate);
  plan.head_mask = head_mask_spec(plan.top);
  plan.fixed_path = ro.results_path ? *ro.results_path : results.path;
  if (ro.resume_path || !plan.fixed_path.empty()) {
    // A torchrun restart (--max-restarts) finds its own failed attempt's file there (join_group).
    const auto denv = train::DistributedEnv::from_environment();
    const bool restart = denv && denv->restart_count > 0;
    check_results_path(ro.resume_path ? *ro.resume_path : plan.fixed_path, ro.resume_path.has_value(),
                       ro.overwrite || restart);
  }
  return plan;
}

/// Phase 2. Registry, dataset and model (build_setup), the trainer, its context and its check
/// (one error naming trainer, model and dataset), the precision and the threads.
Built build(const Plan& plan, const RunOptions& ro) {
  Built b{build_setup(plan.top, ro.plugin_dirs), nullptr, {}, 0, "", {}, {}};
  const plugin::BuildContext& ctx = b.setup.ctx;
  b.trainer = b.setup.registry->create<train::Trainer>(plan.e.trainer, ctx);
  if ((!plan.eval.samples.empty() || plan.eval.split) && !b.setup.model) {
    experiment_binding().fail(plan.top, &ExperimentConfig::evaluate,
                              "translating samples or a split needs an encoder + decoder model");
  }
  if (const int64_t vocab = ctx.data.tgt_vocab_size; plan.eval.split && vocab > 0 && plan.eval.beam_size > vocab) {
    // Checked before training: a beam this wide held beam_size copies of every sentence's state
    // and ran out of memory (or was killed) at the end of the run.
    experiment_binding().fail(plan.top, &ExperimentConfig::evaluate,
                              fmt::format("beam_size {} is more than the target vocabulary's {} tokens: at most {}",
                                          plan.eval.beam_size, vocab, vocab));
  }
  train::TrainContext& tc = b.tc;
  tc.model = b.setup.model;
  tc.custom = b.setup.custom;
  tc.build = &ctx;
  tc.dataset = b.setup.dataset.get();
  tc.device = ctx.device;
  tc.precision = plan.e.precision;
  train::apply_precision(tc.precision);
  tc.seed = static_cast<uint64_t>(plan.e.seed);
  tc.stop = &stop_flag();
  // The trainer-model-dataset contract, before anything is written: one error naming them all.
  try {
    b.trainer->check(tc);
  } catch (const ConfigError& e) {
    const Node& t = plan.e.trainer;
    throw ConfigError(fmt::format("{}: trainer '{}' cannot train {} on dataset '{}': {} (at 'trainer')",
                                  t.location().str(), plugin_name(t), describe_model(plan.e.model),
                                  b.setup.dataset_name, e.what()));
  }
  if (!plan.head_mask.empty()) {  // checked against the model's attention before anything is written
    const torch::nn::Module* module = tc.model ? static_cast<const torch::nn::Module*>(tc.model.get())
                                               : static_cast<const torch::nn::Module*>(tc.custom.get());
    ATTNLAB_CHECK(module != nullptr, ConfigError,
                  "{}: trainer '{}' builds its own model (the experiment has no model: section), so a head mask has "
                  "no attention modules to check and reach",
                  plan.head_mask.items.front().where, plugin_name(plan.e.trainer));
    b.sites = nn::attention_sites(*module);
    b.head_mask = resolve_head_mask(plan.head_mask, b.sites, ctx.device);
  }
  b.num_parameters = b.trainer->num_parameters(tc);
  b.threads_choice = settle_threads(plan.top, b.num_parameters);
  return b;
}

/// Phase 3. Under torchrun (WORLD_SIZE and the rest in the environment), join the process group
/// before anything is written (docs/DISTRIBUTED.md); every rank has built the same dataset, model
/// and trainer. Then the results file: --resume's (checked to be resumable), a torchrun restart's
/// (rank 0 decides for all), the fixed path, or a default name, rank 0's on every rank.
Group join_group(const Plan& plan, Built& b, const RunOptions& ro) {
  Group g;
  train::TrainContext& tc = b.tc;
  const auto denv = train::DistributedEnv::from_environment();
  if (denv) g.restart_count = denv->restart_count;
  if (denv) g.dist = join_if_distributed(*denv, *b.trainer, plan.e.trainer, tc.device, ro.quiet);
  tc.distributed = g.dist.get();
  // A torchrun restart (--max-restarts) of a run with a fixed results path continues the attempt
  // that failed from its last checkpoint, as --resume would.
  g.resume_path = ro.resume_path;
  if (g.restart_count > 0 && !g.resume_path) {
    std::string verdict;
    if (tc.writes_files() && !plan.fixed_path.empty() && b.trainer->can_resume() &&
        files::problem(train::checkpoint_dir(plan.fixed_path) + "/last.pt", files::Want::File).empty()) {
      verdict = plan.fixed_path;
    }
    if (g.dist) verdict = g.dist->share(verdict);
    if (!verdict.empty()) {
      g.resume_path = verdict;
      if (!ro.quiet && tc.writes_files()) {
        spdlog::info("torchrun restart {}: resuming {} from its last checkpoint", g.restart_count, verdict);
      }
    }
  }
  g.path = plan.fixed_path;
  if (g.resume_path) {
    g.path = *g.resume_path;
    g.stored_config = check_resumable(g.path, plan.e.experiment, ro, *b.trainer, tc);
    tc.resume = true;
  }
  if (g.path.empty()) g.path = default_results_path(plan.e.experiment);
  if (g.dist) g.path = g.dist->share(g.path);  // rank 0's choice (a default name holds the time)
  tc.checkpoint_dir = train::checkpoint_dir(g.path);
  return g;
}

/// Phase 5's content: what the file says about the run before it trains.
RunAttributes run_attributes(const Plan& plan, const Built& b, const Group& g, const RunOptions& ro) {
  RunAttributes a;
  a.command_line = ro.command_line;
  a.resumed = g.resume_path.has_value();
  a.torchrun_restarts = g.restart_count;
  a.description = plan.e.description;
  a.seed = plan.e.seed;
  a.device = b.setup.ctx.device.str();
  a.precision = train::precision_name(b.tc.precision);
  a.experiment_file = ro.experiment_path;
  a.plugins = b.setup.registry->used();
  a.num_parameters = b.num_parameters;
  a.threads = torch::get_num_threads();
  a.threads_choice = b.threads_choice;
  a.world_size = g.dist ? g.dist->world_size() : 1;
  a.backend = g.dist ? g.dist->backend() : std::string("none");
  const Node resolved = resolved_config(plan.top, *b.setup.registry);
  a.config_yaml = config::to_yaml(resolved);
  a.config_json = config::to_json(resolved);
  if (a.resumed && a.config_yaml != g.stored_config && !ro.quiet) {
    spdlog::warn("resuming {} with a configuration that differs from the stored one; /config now holds the new one",
                 g.path);
  }
  return a;
}

/// A rank other than 0: it trains its shards and takes part in every collective, writes nothing,
/// and leaves the evaluation to rank 0. Errors leave as exceptions (exit 1, the runner prints them).
int train_rank(Built& b, train::Distributed& dist) {
  DivergenceWatch watch;
  b.tc.on_epoch = [&](const train::EpochReport& r) {  // the reduced numbers: every rank decides alike
    test_exit_at_epoch(r.epoch);
    watch.epoch(r);
  };
  train::FitResult fit;
  try {
    fit = fit_with(*b.trainer, b.tc);
  } catch (const Interrupted&) {
    return watch.diverged() ? 2 : 130;
  }
  if (fit == train::FitResult::Diverged || watch.diverged()) return 2;
  if (fit == train::FitResult::Interrupted || stop_flag().load()) return 130;
  check_ranks_agree(dist, b.setup.model, b.setup.custom);
  return 0;
}

/// Phase 6. Training, each epoch's report appended to the file; then, under torchrun, the ranks'
/// weights checked to agree. Returns the exit code when training ended the run (diverged,
/// interrupted), nothing when it goes on.
std::optional<int> fit_model(RunRecord& run, Built& b, const Group& g, const Plan& plan, const RunOptions& ro) {
  results::Results& res = run.results();
  Progress progress(b.trainer->max_epochs(), ro.quiet);
  if (!ro.quiet) {
    spdlog::info("{}: {} parameters on {}, results -> {}", plan.e.experiment, b.num_parameters,
                 b.setup.ctx.device.str(), run.path());
    if (!b.threads_choice.empty()) spdlog::info("threads {}", b.threads_choice);
  }
  b.tc.results = &res;
  const auto op_counter = OpCounter::from_environment();  // bench/run's op counts
  DivergenceWatch watch;
  b.tc.on_epoch = [&](const train::EpochReport& r) {
    for (const auto& [k, v] : r.train) res.append_metric("train", k, v);
    for (const auto& [k, v] : r.val) res.append_metric("val", k, v);
    res.append_metric("epoch", "seconds", r.seconds);
    res.append_metric("epoch", "index", static_cast<double>(r.epoch));
    res.flush();
    if (op_counter) op_counter->epoch(r.epoch);
    progress.epoch(r);
    watch.epoch(r);
  };
  train::FitResult fit;
  try {
    fit = fit_with(*b.trainer, b.tc);
    if (g.dist) record_distributed(res, *g.dist, ro.quiet);
  } catch (const Interrupted& e) {
    if (!watch.diverged()) return run.interrupted(e.what());
    fit = train::FitResult::Diverged;
  } catch (const std::exception& e) {
    run.failed(e);
    throw;
  }
  if (fit == train::FitResult::Diverged || watch.diverged()) {
    return run.diverged(watch.diverged() ? watch.why() : std::string("train loss is not finite"));
  }
  if (fit == train::FitResult::Interrupted || stop_flag().load()) return run.interrupted("interrupted during training");
  if (g.dist) {
    try {
      check_ranks_agree(*g.dist, b.setup.model, b.setup.custom);
      res.set_attr("distributed_weights_agree", static_cast<int64_t>(1));
    } catch (const std::exception& e) {
      run.failed(e);
      throw;
    }
  }
  return std::nullopt;
}

/// Phase 7. The trainer's own evaluation, then the `evaluate:` section (samples, a split with the
/// best checkpoint); a signal between them ends the run interrupted.
std::optional<int> evaluate_model(RunRecord& run, Built& b, const Plan& plan, const RunOptions& ro) {
  try {
    b.trainer->evaluate(b.tc);
    throw_if_stopped("the trainer's evaluation");
    if (nn::EncoderDecoder& model = b.setup.model) {
      evaluate(plan.eval, model, *b.setup.dataset, run.results(), ro.quiet);
      throw_if_stopped("translating the evaluate samples");
      test_signal_at("evaluate_split");
      evaluate_split(plan.eval, model, *b.setup.dataset, run.results(), b.tc.checkpoint_dir + "/best.pt", ro.quiet,
                     &stop_flag());
      throw_if_stopped("the split evaluation");
    }
  } catch (const Interrupted& e) {
    return run.interrupted(e.what());
  } catch (const std::exception& e) {
    run.failed(e);
    throw;
  }
  return std::nullopt;
}

}  // namespace

int run_experiment(const RunOptions& ro) {
  const Plan plan = load_and_validate(ro);
  Built built = build(plan, ro);
  // The head mask (if any) holds from here to the end: training, validation, the evaluation.
  const nn::HeadMaskScope head_mask(built.head_mask.mask.empty() ? nullptr : &built.head_mask.mask);
  Group group = join_group(plan, built, ro);
  SignalScope signals;  // before the file exists: a signal from here on ends the run "interrupted"
  if (!built.tc.writes_files()) return train_rank(built, *group.dist);
  // Everything is valid: from here on the run is recorded.
  RunRecord run(group.path, plan.e.experiment, group.resume_path.has_value(), ro.quiet);
  test_signal_at("results_created");
  run.record(run_attributes(plan, built, group, ro));
  if (!built.head_mask.mask.empty()) {
    write_head_mask(run.results(), "interventions/head_mask", built.head_mask, built.sites);
    if (!ro.quiet) {
      spdlog::info("head mask {}: {} of {} heads off while training and evaluating", built.head_mask.text,
                   built.head_mask.heads_off, built.head_mask.heads_total);
      for (const auto& layer : built.head_mask.whole_layers) {
        spdlog::info("every head of {} is off: its attention adds only W_o's bias (allowed, as in Michel et al. 2019)",
                     layer);
      }
    }
  }
  built.setup.dataset->write_results(run.results());  // the dataset's own data and figures
  run.results().flush();
  if (const auto end = fit_model(run, built, group, plan, ro)) return *end;
  if (const auto end = evaluate_model(run, built, plan, ro)) return *end;
  return run.completed();
}

}  // namespace attnlab::run
