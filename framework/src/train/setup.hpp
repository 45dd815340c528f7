#pragma once
// What `runner EXPERIMENT`, `runner eval` and `runner summary` share: from a validated experiment
// (top-level Options) to a registry, a prepared dataset and the model, on the chosen device.
#include <attnlab/config/schema.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/model.hpp>
#include <attnlab/plugin/registry.hpp>

#include <memory>
#include <string>
#include <vector>

namespace attnlab::train {

struct Setup {
  std::unique_ptr<plugin::Registry> registry;  // first: destroyed last, after the plugin objects
  plugin::BuildContext ctx;                    // registry, device, seed, data dir, data sizes
  std::shared_ptr<data::Dataset> dataset;
  nn::EncoderDecoder model{nullptr};           // `model: {encoder:, decoder:}`
  std::shared_ptr<nn::Model> custom;           // `model: {plugin: ...}`
  std::string dataset_name;
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

/// The experiment's `results:` section ({path: ...}), validated.
config::Options results_options(const config::Options& top);

/// For tools that take an experiment like the runner (`summary`, `batches`): loads the file with
/// its key=value overrides (`args` = file, overrides...), validates it against the experiment
/// schema and builds the setup. `experiment` gets the experiment's name.
Setup setup_experiment(const std::vector<std::string>& args, const std::vector<std::string>& plugin_dirs,
                       std::string& experiment);

}  // namespace attnlab::train
