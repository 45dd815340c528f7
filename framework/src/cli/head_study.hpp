#pragma once
// What `runner ablate` and `runner prune` share: a finished run rebuilt with its checkpoint, its
// attention sites and the mask it trained with, a split's batches on the device, and the two
// measurements of a head mask: the split's teacher-forced loss and Michel et al.'s gradient
// importance (and greedy BLEU through train::translate_split).
#include <attnlab/data/dataset.hpp>
#include <attnlab/metrics/sacrebleu.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/train/loss.hpp>

#include <torch/types.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {

/// The split's batches on the model's device, once (every measurement reads them again).
struct SplitData {
  std::vector<data::Batch> batches;
  std::vector<nn::EncoderOutput> encoded;  // the encoder's output per batch under the run's mask, once asked for
  int64_t tokens = 0;                      // non-pad target tokens
  int64_t sentences = 0;
};

/// One head of the model: its site and index (from 0).
struct Head {
  const nn::AttentionSite* site = nullptr;
  int64_t index = 0;
};

/// A finished run opened for measuring its heads.
struct HeadStudy {
  std::string run, split_name;
  data::Split split = data::Split::Val;
  run::Setup setup;
  std::vector<nn::AttentionSite> sites;
  run::ResolvedHeadMask trained;  // the heads the run trained with switched off (usually none)
  std::vector<Head> heads;        // every head the run trained with, in site order
  SplitData data;                 // the split's batches, cut to `sentences` rows when that is set
  int64_t sentences = 0;          // StudyArgs::sentences
  train::TokenLoss how;           // summed token cross-entropy, no label smoothing
  torch::Device device = torch::kCPU;
  /// Set when the run is a decoder-only language model (its setup has no encoder + decoder): the
  /// loss is next-token cross-entropy over the labels its dataset scores, and there is no BLEU.
  std::shared_ptr<nn::LanguageModel> lm;

  /// The model measured: the encoder + decoder, or the language model.
  torch::nn::Module& module();
  /// Whether BLEU can be measured (a translation model).
  bool translates() const { return lm == nullptr; }

  /// The run's own mask, or nullptr when it trained with every head.
  const nn::HeadMask* base() const { return trained.mask.empty() ? nullptr : &trained.mask; }
  /// Whether head `h` of `site` was off in training (its weights never trained).
  bool off_in_training(const nn::AttentionSite& site, int64_t h) const;
  /// The run's own mask with `off` switched off too.
  nn::HeadMask mask_with_off(const std::vector<Head>& off) const;
  /// The split's loss per target token under the active mask; `reuse_encoder` when the mask
  /// differs from the run's own in decoder heads only (the encoder's output is computed once).
  double loss(bool reuse_encoder);
  /// Greedy sacreBLEU of the split under the active mask.
  metrics::BleuScore bleu();
  /// Michel et al.'s I_h = E|dL/dxi_h| at `mask` (xi as it has them), one pass over the split:
  /// per batch the gradient of the summed token loss, |.| accumulated, over the split's tokens.
  /// One [heads] tensor (CPU, double) per site.
  std::vector<torch::Tensor> importance(const nn::HeadMask& mask);
};

/// The options `runner ablate` and `runner prune` share: the run, its overrides, --split, --checkpoint.
struct StudyArgs {
  std::string run, split_name = "val", which = "best";
  std::vector<std::string> overrides;
  int64_t sentences = 0;  // the split's first N sentences only (0 = all)
};

/// Adds StudyArgs' options to `app`.
void add_study_options(CLI::App& app, StudyArgs& args);

/// Opens `run` for `command` ("ablate", "prune"): refuses a live run (warns of one that did not
/// complete), rebuilds it with checkpoint `which`, finds its sites (ConfigError when a mask reaches
/// none), loads `split_name` (ConfigError when the dataset lacks it or it has no target tokens).
HeadStudy open_head_study(const std::string& command, const StudyArgs& args, const std::vector<std::string>& plugin_dirs,
                          bool quiet);

/// `runner ablate --tokens`: each source token of the split's first `max_sentences` sentences
/// blanked in turn (blankout.cpp); writes /ablation/<name> and the sentences' attention.
int ablate_tokens(HeadStudy& study, const std::string& name, int64_t max_sentences, bool quiet);

/// Whether a mask on `module` leaves the encoder's output unchanged: the decoder's own modules.
bool decoder_only(const std::string& module);

/// A group name under /ablation or /pruning: ConfigError naming `option` unless it is one HDF5
/// link name of letters, digits, '_', '-', '.'.
void check_group_name(const std::string& name, const std::string& option, const std::string& group);

}  // namespace attnlab::cli
