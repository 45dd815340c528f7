#pragma once
// GRU encoder-decoders of d2l 0.17 (sections 9.7 and 10.4): Seq2SeqEncoder, Seq2SeqDecoder (no
// attention) and Seq2SeqAttentionDecoder (Bahdanau), batch-first. The plugins "gru" (encoder and
// decoder) and "gru_bahdanau" (decoder) map their options onto these.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <memory>
#include <vector>

namespace attnlab::nn {

struct GruOptions {
  GruOptions(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens, int64_t num_layers)
      : vocab_size_(vocab_size), embed_size_(embed_size), num_hiddens_(num_hiddens), num_layers_(num_layers) {}
  TORCH_ARG(int64_t, vocab_size);    // embedding rows (decoders: also the output size)
  TORCH_ARG(int64_t, embed_size);    // E
  TORCH_ARG(int64_t, num_hiddens);   // H, the GRU's hidden size
  TORCH_ARG(int64_t, num_layers);    // L, stacked GRU layers
  TORCH_ARG(double, dropout) = 0.0;  // between GRU layers (and on Bahdanau's attention weights)
};

/// d2l Seq2SeqEncoder: embedding, L-layer GRU over the whole padded source (no packing, as d2l).
class GruEncoderImpl : public Encoder {
 public:
  explicit GruEncoderImpl(const GruOptions& options);
  /// src [B, S] ids, valid_lens [B] (passed through for the decoder's masking) ->
  /// states [B, S, H] (last layer, every step), hidden [L, B, H] (every layer, last step)
  EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& valid_lens) override;
  int64_t output_size() const override { return options.num_hiddens(); }

  GruOptions options;
  torch::nn::Embedding embedding{nullptr};
  torch::nn::GRU rnn{nullptr};
};
TORCH_MODULE(GruEncoder);

/// Decoding state of the GRU decoders.
struct GruDecoderState : DecoderState {
  torch::Tensor hidden;   // [L, B, H] recurrent state; starts as the encoder's final state
  torch::Tensor context;  // [B, H] baseline decoder only: the encoder's final last-layer state
  int64_t steps = 0;      // incremental mode: target positions decoded so far (the next query's position)
};

/// d2l Seq2SeqDecoder: every step's input is cat(embedding, context) with context the encoder's
/// final last-layer state (fixed for the whole sequence, in prediction too), L-layer GRU, dense.
class GruDecoderImpl : public Decoder {
 public:
  explicit GruDecoderImpl(const GruOptions& options);
  /// enc.hidden [L, B, H] is required (an RNN encoder with the same L and H).
  std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental) override;
  /// tgt [B, T] ids -> logits [B, T, V]. Incremental mode keeps the new hidden state in `state`.
  torch::Tensor forward(const torch::Tensor& tgt, DecoderState& state) override;

  GruOptions options;
  torch::nn::Embedding embedding{nullptr};
  torch::nn::GRU rnn{nullptr};       // input E + H
  torch::nn::Linear dense{nullptr};  // H -> V
};
TORCH_MODULE(GruDecoder);

/// d2l Seq2SeqAttentionDecoder: at each step the query is the last layer's previous hidden state
/// [B, 1, H], keys and values are the encoder states [B, S, H] masked by the source valid lengths;
/// the context [B, 1, H] is concatenated before the embedding into the GRU; dense output.
class GruBahdanauDecoderImpl : public Decoder {
 public:
  /// scorer: built for query size H and key size H, one head, role Cross (d2l: additive with H
  /// hidden units).
  GruBahdanauDecoderImpl(const GruOptions& options, std::shared_ptr<Scorer> scorer);
  std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental) override;
  /// tgt [B, T] ids -> logits [B, T, V], one attention step per target position; step t's query
  /// stands at position t (state.steps + t in incremental mode), the keys at 0..S-1.
  torch::Tensor forward(const torch::Tensor& tgt, DecoderState& state) override;
  void set_recording(bool on) override;
  /// {"decoder_cross": [1, B, 1, T, S]} (one layer, one head) after a recorded forward; in
  /// incremental mode T = the steps of that forward (one per greedy step).
  AttentionMap attention() const override;

  GruOptions options;
  Attention attention_pool{nullptr};  // registered as "attention"
  torch::nn::Embedding embedding{nullptr};
  torch::nn::GRU rnn{nullptr};       // input H + E (context first, as d2l)
  torch::nn::Linear dense{nullptr};  // H -> V

 private:
  torch::Tensor weights_;  // [1, B, 1, T, S] from the last recorded forward
};
TORCH_MODULE(GruBahdanauDecoder);

}  // namespace attnlab::nn
