#pragma once
// `runner eval` on a decoder-only language model: the loss, perplexity and next-token accuracy of a
// split's scored labels, and the mean loss at each position (from which the in-context learning
// score of Olsson et al. 2022 is read: the loss late in the context minus the loss early in it),
// with heads switched off when asked; stored as /eval/<name> (docs/RESULTS.md).
#include <attnlab/nn/language_model.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {

struct LmEvalOptions {
  std::string run, checkpoint, split_name, name;
  std::string text;  // a UTF-8 file measured instead of the split ("" = the split)
  int64_t context = 0;  // --context: tokens per row of the text (0 = the dataset's block_size)
  /// --window: each query sees the `window` latest tokens (itself included) and the first `sinks`
  /// of its row, through a KV cache that evicts the rest, at the cache's positions (StreamingLLM);
  /// 0 = every earlier token.
  int64_t window = 0, sinks = 0;
  /// --recompute (with --window, no sinks): each query's window is run afresh from position 0
  /// instead (StreamingLLM's "sliding window with re-computation"; any language model).
  bool recompute = false;
  run::HeadMaskSpec trained;  // the heads the run trained without: off
  run::HeadMaskSpec asked;    // --head-mask: off as well
  bool quiet = false;
};

/// Measures and writes /eval/<name> (replacing a group of that name), prints one line. ConfigError
/// naming the splits the dataset has when it lacks `split_name`.
int eval_language_model(run::Setup& setup, nn::LanguageModel& lm, const LmEvalOptions& o);

}  // namespace attnlab::cli
