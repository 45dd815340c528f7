#pragma once
// StreamingLLM's evaluation of a language model (Xiao et al. 2023, "Efficient Streaming Language
// Models with Attention Sinks"): the tokens go through the KV cache one at a time, and after each
// step the cache keeps only the first `sinks` positions and the latest ones, so that every query
// sees the `window` latest tokens (itself included) and the first `sinks` of its row. Positions are
// the cache's, as StreamingLLM gives them: the state's step count is set to what the cache holds,
// so a query stands at most sinks + window - 1 from any key (a relative scheme never meets a
// distance it did not train on; an absolute one gives each new token the position of its slot).
// With sinks 0 it is window attention, the baseline StreamingLLM shows breaking down once the
// first tokens leave the window.
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

}  // namespace attnlab::train
