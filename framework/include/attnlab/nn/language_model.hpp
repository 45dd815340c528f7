#pragma once
// Decoder-only language models: a "model" plugin that implements LanguageModel can be trained by
// the "lm" trainer, which finds the interface with std::dynamic_pointer_cast<nn::LanguageModel>
// (ctx.custom); the typeinfo lives in libattnlab (key function), so the cast works across plugin
// libraries. Its attention records as kDecoderSelf (Target x Target), so head masks, the recorder,
// `runner plot/report/rollout` and the Python package read it as a translation model's
// decoder self-attention.
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/model.hpp>

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace attnlab::nn {

class LanguageModel : public Model {
 public:
  ~LanguageModel() override;  // defined in libattnlab (key function)

  /// tokens [B, T] ids -> logits [B, T, V]; row t is the distribution of token t + 1 and sees
  /// tokens 0..t only (causal). Positions start at 0.
  virtual torch::Tensor forward(const torch::Tensor& tokens) = 0;

  /// A decoding state with empty caches (DecoderState::incremental true) for step().
  virtual std::unique_ptr<DecoderState> init_state() = 0;
  /// tokens [B, T] standing after what `state` has seen -> logits [B, T, V]; the state keeps what
  /// the next step needs (a KV cache, a recurrent scorer's state). Over a sequence fed in pieces,
  /// the same logits as forward() on the whole of it.
  virtual torch::Tensor step(const torch::Tensor& tokens, DecoderState& state) = 0;

  /// Output classes V (the vocabulary).
  virtual int64_t vocab_size() const = 0;
  /// The most positions a sequence may have: an absolute positional encoding's max_len, 0 when
  /// nothing bounds it (relative scorers, no positions).
  virtual int64_t max_positions() const = 0;
};

/// ConfigError naming `who` unless the model is causal on `device`: with one token changed, the
/// logits of the positions before it stay the same (eval mode, no gradients; the module's mode is
/// restored). Catches a scorer that ignores the per-query valid lengths of causal self-attention.
void check_causal(LanguageModel& model, torch::Device device, const std::string& who);

}  // namespace attnlab::nn
