#pragma once
// What `runner EXPERIMENT`, `runner eval` and `runner summary` share: from a validated experiment
// (top-level Options) to a registry, a prepared dataset and the model, on the chosen device.
#include <attnlab/config/schema.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/model.hpp>
#include <attnlab/plugin/registry.hpp>

#include "run/interventions.hpp"
#include "run/sections.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::run {

struct Setup {
  std::unique_ptr<plugin::Registry> registry;  // first: destroyed last, after the plugin objects
  plugin::BuildContext ctx;                    // registry, device, seed, data dir, data sizes
  std::shared_ptr<data::Dataset> dataset;
  nn::EncoderDecoder model{nullptr};  // `model: {encoder:, decoder:}`
  std::shared_ptr<nn::Model> custom;  // `model: {plugin: ...}`
  std::string dataset_name;
  /// What the model's weights are when a command opened a run (cli::load_run): the checkpoint's
  /// name, or "pretrained" for a pretrained model measured as it came (no checkpoints: the folder's).
  std::string weights;
};

/// Seeds torch with `seed`, sets the thread count, discovers plugins (plugin_dirs first), picks the
/// device, creates and prepares the dataset, creates the model (moved to the device).
/// ConfigError/PluginError/DataError as run_experiment documents.
Setup build_setup(const config::Options& top, const std::vector<std::string>& plugin_dirs);

/// Checks every plugin section of a validated experiment against its plugin's schema (plugin found,
/// options valid), creating nothing: what build_setup checks before the dataset reads anything.
void validate_sections(const config::Options& top, const plugin::Registry& registry);

/// Everything run_experiment checks of an experiment (after defaults and overrides) before it
/// builds the dataset: the experiment schema, the results and evaluate sections, every plugin
/// section. `runner sweep` checks each run this way before starting any.
void validate_experiment(const config::Node& root, const plugin::Registry& registry);

/// The plugin named by a component node (for messages): a scalar name or a map's `plugin:`, else "?".
std::string plugin_name(const config::Node& node);

/// The experiment's `interventions.head_mask`, validated as written (not yet against a model).
HeadMaskSpec head_mask_spec(const config::Options& top);

/// The experiment's `results:` section ({path: ...}), validated and read.
ResultsConfig results_config(const config::Options& top);

/// `threads: auto` picks one intra-op thread for models below this many parameters and one per
/// core otherwise. Measured on 2 cores with libgomp's default waits (bench/README.md, "threads:
/// auto"): corners (1.7k parameters) is faster on one thread, the d2l 0.17 Transformer and
/// Bahdanau models (49k-61k) take the same time on one or two (so one frees a core for a sweep's
/// other runs), the seed-000 Transformer (1.9M) is 1.8x faster on two.
inline constexpr int64_t kAutoThreadsParameters = 250000;

/// Applies `threads: auto` now that the model's size is known (the runner, after the trainer
/// reports num_parameters); "" when threads is a number (build_setup applied it), else the choice
/// in words for the results file ("auto: 60905 parameters, below 250000: 1 thread").
std::string settle_threads(const config::Options& top, int64_t num_parameters);

/// For tools that take an experiment like the runner (`summary`, `batches`): loads the file with
/// its key=value overrides (`args` = file, overrides...), validates it against the experiment
/// schema and builds the setup. `experiment` gets the experiment's name.
Setup setup_experiment(const std::vector<std::string>& args, const std::vector<std::string>& plugin_dirs,
                       std::string& experiment);

}  // namespace attnlab::run
