#pragma once
// d2l 0.17's Seq2SeqDecoder (section 9.7), the "gru" decoder plugin's class (used by this plugin
// alone; tests/ tests it). The sizes, decoding state and GRU stack it shares with the other GRU
// plugins are the framework's (nn/rnn.hpp).
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/rnn.hpp>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>

namespace attnlab::decoders::gru {

/// d2l Seq2SeqDecoder: every step's input is cat(embedding, context) with context the encoder's
/// final last-layer state (fixed for the whole sequence, in prediction too), L-layer GRU, dense.
class GruDecoderImpl : public nn::Decoder {
 public:
  explicit GruDecoderImpl(const nn::GruOptions& options);
  /// enc.hidden [L, B, H] is required (an RNN encoder with the same L and H).
  std::unique_ptr<nn::DecoderState> init_state(const nn::EncoderOutput& enc, bool incremental) override;
  /// tgt [B, T] ids -> logits [B, T, V]. Incremental mode keeps the new hidden state in `state`.
  torch::Tensor forward(const torch::Tensor& tgt, nn::DecoderState& state) override;
  torch::nn::Embedding token_embedding() const override { return embedding; }
  /// model.share_embeddings: embeds with the encoder's table; its own is unregistered.
  void use_token_embedding(const torch::nn::Embedding& shared) override {
    unregister_module("embedding");
    embedding = shared;
  }

  nn::GruOptions options;
  torch::nn::Embedding embedding{nullptr};
  nn::FusedGru rnn{nullptr};         // input E + H
  torch::nn::Linear dense{nullptr};  // H -> V
};
TORCH_MODULE(GruDecoder);

}  // namespace attnlab::decoders::gru
