// A finished run's checkpoints and its model rebuilt from /config (cli/run_loading.hpp).
#include "cli/run_loading.hpp"

#include "config/detail.hpp"

#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/run/experiment.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

namespace attnlab::cli {
namespace {

/// "it has best, epoch-9, epoch-10, last" or "it has no checkpoint folder" for errors.
std::string available_checkpoints(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "the run has no checkpoint folder";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".pt") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names.empty() ? "its checkpoint folder is empty" : fmt::format("it has {}", fmt::join(names, ", "));
}

}  // namespace

data::Split parse_split(const std::string& name) {
  if (name == "train") return data::Split::Train;
  if (name == "val") return data::Split::Val;
  if (name == "test") return data::Split::Test;
  throw ConfigError(fmt::format("--split must be train, val or test, found '{}'", name));
}

std::string splits_of(const data::Dataset& dataset) {
  std::vector<std::string> have;
  for (const auto split : {data::Split::Train, data::Split::Val, data::Split::Test}) {
    if (dataset.has_split(split)) have.push_back(data::split_name(split));
  }
  return fmt::format("{}", fmt::join(have, ", "));
}

/// Where checkpoint `which` of `run` lives: <run>.ckpt/<which>.pt (not checked).
std::string checkpoint_path(const std::string& run, const std::string& which) {
  return train::checkpoint_dir(run) + "/" + which + ".pt";
}

/// RUN.h5.ckpt/<which>.pt, checked: a name (not a path) of a readable checkpoint file.
std::string checkpoint_file(const std::string& run, const std::string& which) {
  ATTNLAB_CHECK(!which.empty() && which.find_first_of("/\\") == std::string::npos && which.front() != '.', ConfigError,
                "checkpoint '{}' of {}: name a checkpoint of the run (best, last, epoch-N, average), not a path", which, run);
  const auto ckpt = checkpoint_path(run, which);
  const auto why = files::problem(ckpt, files::Want::File);
  ATTNLAB_CHECK(why != "no such file", DataError,
                "no checkpoint {} for run {} ({}; trainers that checkpoint write last.pt and best.pt every epoch, "
                "epoch-N.pt with keep_checkpoints, runner average writes average.pt{})",
                ckpt, run, available_checkpoints(train::checkpoint_dir(run)),
                std::filesystem::is_directory(train::checkpoint_dir(run))
                    ? ""
                    : "; train the run again with trainer.checkpoints=true to keep them");
  ATTNLAB_CHECK(why.empty(), DataError, "checkpoint {} of run {}: {}", ckpt, run, why);
  return ckpt;
}

namespace {

/// A value as one line of YAML, or "(not set)".
std::string one_line(const config::Node* n) {
  if (!n) return "(not set)";
  auto text = config::to_yaml(*n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (auto& ch : text) {
    if (ch == '\n') ch = ' ';
  }
  return text;
}

/// Options of the model that change nothing its weights mean when it measures (dropout is off in
/// eval mode; the fused kernels compute the same function).
bool harmless_model_option(const std::string& key) {
  const auto last = key.substr(key.rfind('.') + 1);
  return last.find("dropout") != std::string::npos || last == "fused";
}

}  // namespace

run::Setup load_run(const std::string& run, const std::string& which, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& plugin_dirs, run::HeadMaskSpec& trained_mask) {
  const std::string stored =
      results::read_isolated(run, [&] { return results::ResultsReader(run, results::ReadCheck::none).config(); });
  ATTNLAB_CHECK(!stored.empty(), ResultsError, "results file {} holds no /config to rebuild the run from", run);
  config::Node root = config::parse_yaml(stored, run + ":/config");
  for (const auto& o : overrides) {
    const auto key = config::detail::override_key(o);  // as apply_override reads it: trimmed
    const bool model = key == "model" || key.rfind("model.", 0) == 0 || key.rfind("model[", 0) == 0;
    const auto before = model ? one_line(config::detail::find_key(root, key)) : std::string();
    config::apply_override(root, o);
    // The checkpoint holds the model as trained: an override that makes it another model (more heads
    // over the same weights, another plugin) would measure something that was never trained.
    if (model && !harmless_model_option(key)) {
      const auto after = one_line(config::detail::find_key(root, key));
      ATTNLAB_CHECK(before == after, ConfigError,
                    "override {}: run {} was trained with {}: {}, and its checkpoint holds that model; measuring it "
                    "as {}: {} would measure a model nobody trained (leave the override out; overrides here are for "
                    "device, threads, data_dir and the like)",
                    o, run, key, before, key, after);
    }
  }
  config::Options top(root, run::experiment_schema(), "the stored experiment", {});
  trained_mask = run::head_mask_spec(top);
  // A pretrained model measured as it came (model.pretrained, trainer.max_epochs 0) has no
  // checkpoints: its weights are the folder's, which building the model loads.
  const auto* model_node = root.find("model");
  const auto* pretrained = model_node != nullptr && model_node->is_map() ? model_node->find("pretrained") : nullptr;
  if (pretrained != nullptr && pretrained->is_scalar() && !pretrained->str().empty() &&
      !files::problem(train::checkpoint_dir(run), files::Want::Directory).empty()) {
    run::Setup setup = run::build_setup(top, plugin_dirs);
    setup.weights = "pretrained";
    return setup;
  }
  const auto ckpt = checkpoint_file(run, which);
  run::Setup setup = run::build_setup(top, plugin_dirs);
  ATTNLAB_CHECK(setup.model || setup.custom, ConfigError, "run {} has no model whose weights a checkpoint holds", run);
  setup.weights = which;
  if (setup.model) {
    train::load_model_weights(ckpt, *setup.model);
  } else {
    train::load_model_weights(ckpt, *setup.custom);
  }
  return setup;
}

LanguageModelRun open_language_model(const std::string& run, const std::string& which,
                                     const std::vector<std::string>& overrides,
                                     const std::vector<std::string>& plugin_dirs, const std::string& command,
                                     const std::string& what) {
  const auto status = results::read_isolated(run, [&] { return results::ResultsReader(run).status(); });
  ATTNLAB_CHECK(status != results::Status::Running, ResultsError,
                "run {} is still running (or died without a word): runner {} works on a finished run", run, command);
  LanguageModelRun r;
  run::HeadMaskSpec trained_spec;  // heads the run trained without stay off
  r.setup = load_run(run, which, overrides, plugin_dirs, trained_spec);
  r.lm = std::dynamic_pointer_cast<nn::LanguageModel>(r.setup.custom);
  ATTNLAB_CHECK(r.lm != nullptr, ConfigError,
                "run {} is not a decoder-only language model (model: {{plugin: gpt}}): runner {} {}; `runner eval` "
                "and `runner ablate` work on a translation model",
                run, command, what);
  if (!trained_spec.empty()) {
    r.trained = run::resolve_head_mask(trained_spec, nn::attention_sites(*r.lm), r.setup.ctx.device);
  }
  return r;
}

void require_translation_model(const run::Setup& setup, const std::string& run, const std::string& command) {
  if (setup.model) return;
  const bool lm = std::dynamic_pointer_cast<nn::LanguageModel>(setup.custom) != nullptr;
  throw ConfigError(
      lm ? fmt::format("run {} is a decoder-only language model: runner {} works on an encoder + decoder; "
                       "`runner generate {} --prompt TEXT` samples text from it",
                       run, command, run)
         : fmt::format("run {} has no encoder + decoder model (its model is a model plugin): runner {} works on "
                       "translation models",
                       run, command));
}

}  // namespace attnlab::cli
