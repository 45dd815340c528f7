#pragma once
// A decoder-only transformer language model (GPT): token embedding, optional absolute positions,
// N blocks of causal self-attention (any scorer, KV cache or recurrent state) and FFN (or none:
// attention-only), a final LayerNorm (norm-first), the output layer (tied to the embedding or not).
// It is the framework's TransformerDecoder built without cross-attention, so it has every option
// that stack has, and its attention records as kDecoderSelf.
#include <attnlab/nn/language_model.hpp>
#include <attnlab/nn/transformer.hpp>

namespace attnlab::nn {

class TransformerLMImpl : public LanguageModel {
 public:
  /// `options.cross_attention()` is set false here; `options.vocab_size()` is V.
  TransformerLMImpl(TransformerOptions options, const ScorerFactory& make_scorer);

  torch::Tensor forward(const torch::Tensor& tokens) override;
  std::unique_ptr<DecoderState> init_state() override;
  torch::Tensor step(const torch::Tensor& tokens, DecoderState& state) override;
  int64_t vocab_size() const override { return decoder->options.vocab_size(); }
  int64_t max_positions() const override;

  TransformerDecoder decoder{nullptr};  // registered as "decoder"
};
TORCH_MODULE(TransformerLM);

}  // namespace attnlab::nn
