#pragma once
// StreamingLLM's evaluation of a language model (Xiao et al. 2023, "Efficient Streaming Language
// Models with Attention Sinks"): the tokens go through the KV cache one at a time, and after each
// step the cache keeps only the first `sinks` positions and the latest ones, so that every query
// sees the `window` latest tokens (itself included) and the first `sinks` of its row. Positions are
// the cache's, as StreamingLLM gives them: the state's step count is set to what the cache holds,
// so a query stands at most sinks + window - 1 from any key (a relative scheme never meets a
// distance it did not train on; an absolute one gives each new token the position of its slot).
// With sinks 0 it is window attention, the baseline StreamingLLM shows breaking down once the
// first tokens leave the window. recomputed_window_logits is the other baseline of that paper:
// the window re-encoded from scratch for every token.
#include <attnlab/nn/language_model.hpp>

#include <torch/types.h>

#include <cstdint>
#include <string>

namespace attnlab::train {

/// tokens [B, T] -> logits [B, T, V] (row t predicts token t + 1). window >= 1, sinks >= 0. With
/// sinks + window >= T it is lm.forward(tokens). ConfigError naming `who` when the model does not
/// decode with the framework's transformer KV cache (nn::TransformerDecoderState), or when its
/// attention keeps a recurrent state (linear attention) instead of keys and values to evict.
torch::Tensor streaming_logits(nn::LanguageModel& lm, const torch::Tensor& tokens, int64_t window, int64_t sinks,
                               const std::string& who);

/// StreamingLLM's "sliding window with re-computation" baseline: the logits at position t are the
/// model's, run afresh on tokens max(0, t - window + 1) ... t alone (positions 0 ... window - 1), so
/// no query ever sees a token older than the window and every window starts at position 0, as in
/// training. tokens [B, T] -> logits [B, T, V]; with window >= T it is lm.forward(tokens). Costs
/// about `window` forwards per token (no cache); any language model can be run so. Windows go
/// through the model in chunks of at most `max_logits` logits ([rows, window, V]) at a time.
torch::Tensor recomputed_window_logits(nn::LanguageModel& lm, const torch::Tensor& tokens, int64_t window,
                                       int64_t max_logits = int64_t{1} << 25);

}  // namespace attnlab::train
