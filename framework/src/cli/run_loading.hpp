#pragma once
// What the commands that work on a finished run's model share (`runner eval`, `runner ablate`):
// its checkpoint files, and the run rebuilt from its stored /config with a checkpoint loaded.
#include "run/setup.hpp"

#include <string>
#include <vector>

namespace attnlab::cli {

/// --split's value: train, val or test; ConfigError otherwise.
data::Split parse_split(const std::string& name);

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

}  // namespace attnlab::cli
