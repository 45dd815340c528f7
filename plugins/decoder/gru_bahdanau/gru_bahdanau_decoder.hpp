#pragma once
// d2l 0.17's Seq2SeqAttentionDecoder (section 10.4), the "gru_bahdanau" decoder plugin's class
// (used by this plugin alone; tests/ tests it). The sizes, decoding state and GRU stack it shares
// with the other GRU plugins are the framework's (nn/rnn.hpp), as is its attention pooling.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/rnn.hpp>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>

namespace attnlab::decoders::gru_bahdanau {

/// d2l Seq2SeqAttentionDecoder: at each step the query is the last layer's previous hidden state
/// [B, 1, H], keys and values are the encoder states [B, S, H] masked by the source valid lengths;
/// the context [B, 1, H] is concatenated before the embedding into the GRU; dense output. Its
/// attention records as kDecoderCross layer 0 (one head), one query row per target step.
class GruBahdanauDecoderImpl : public nn::Decoder {
 public:
  /// scorer: built for query size H and key size H, one head, role Cross (d2l: additive with H
  /// hidden units).
  GruBahdanauDecoderImpl(const nn::GruOptions& options, std::shared_ptr<nn::Scorer> scorer);
  std::unique_ptr<nn::DecoderState> init_state(const nn::EncoderOutput& enc, bool incremental) override;
  /// tgt [B, T] ids -> logits [B, T, V], one attention step per target position; step t's query
  /// stands at position t (state.steps + t in incremental mode), the keys at 0..S-1.
  torch::Tensor forward(const torch::Tensor& tgt, nn::DecoderState& state) override;
  torch::nn::Embedding token_embedding() const override { return embedding; }
  /// model.share_embeddings: embeds with the encoder's table; its own is unregistered.
  void use_token_embedding(const torch::nn::Embedding& shared) override {
    unregister_module("embedding");
    embedding = shared;
  }

  nn::GruOptions options;
  nn::Attention attention_pool{nullptr};  // registered as "attention"
  torch::nn::Embedding embedding{nullptr};
  nn::FusedGru rnn{nullptr};         // input H + E (context first, as d2l)
  torch::nn::Linear dense{nullptr};  // H -> V
};
TORCH_MODULE(GruBahdanauDecoder);

}  // namespace attnlab::decoders::gru_bahdanau
