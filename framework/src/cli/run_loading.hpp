#pragma once
// What the commands that work on a finished run's model share (`runner eval`, `runner ablate`):
// its checkpoint files, and the run rebuilt from its stored /config with a checkpoint loaded.
#include <attnlab/nn/language_model.hpp>

#include "run/interventions.hpp"
#include "run/setup.hpp"

#include <string>
#include <vector>

namespace attnlab::cli {

/// --split's value: train, val or test; ConfigError otherwise.
data::Split parse_split(const std::string& name);
/// The splits a dataset has, "train, val".
std::string splits_of(const data::Dataset& dataset);

/// Where checkpoint `which` of `run` lives: <run>.ckpt/<which>.pt (not checked).
std::string checkpoint_path(const std::string& run, const std::string& which);

/// RUN.h5.ckpt/<which>.pt, checked: a name (not a path) of a readable checkpoint file; DataError
/// naming the checkpoints the run has when it is not there.
std::string checkpoint_file(const std::string& run, const std::string& which);

/// A run to decode with: its stored /config with `overrides` applied, built (dataset and model on
/// its device), and the weights of its checkpoint `which` loaded. `trained_mask` gets the heads the
/// run trained with switched off (`interventions.head_mask`; empty for most runs): the caller must
/// keep them off (their weights never trained), e.g. with resolve_head_mask and a HeadMaskScope.
run::Setup load_run(const std::string& run, const std::string& which, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& plugin_dirs, run::HeadMaskSpec& trained_mask);

/// A finished language-model run opened by `runner <command>` (generate, heads): its setup with the
/// checkpoint loaded, the model as a LanguageModel, and the heads it trained without (resolved, to
/// be kept off with a HeadMaskScope over `trained.mask`; empty for most runs).
struct LanguageModelRun {
  run::Setup setup;
  std::shared_ptr<nn::LanguageModel> lm;
  run::ResolvedHeadMask trained;
};

/// Refuses a live run (ResultsError) and a run whose model is not a language model (ConfigError
/// naming `runner <command>` and `what` it does, e.g. "samples text from one"), then loads it.
LanguageModelRun open_language_model(const std::string& run, const std::string& which,
                                     const std::vector<std::string>& overrides,
                                     const std::vector<std::string>& plugin_dirs, const std::string& command,
                                     const std::string& what);

/// ConfigError unless `setup` has an encoder + decoder (runner `command` translates or measures
/// with one); a language model's message names `runner generate`.
void require_translation_model(const run::Setup& setup, const std::string& run, const std::string& command);

}  // namespace attnlab::cli
