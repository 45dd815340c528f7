#pragma once
// d2l 0.17's Seq2SeqEncoder (section 9.7), the "gru" encoder plugin's class (used by this plugin
// alone; tests/ tests it). The sizes and the GRU stack it shares with the GRU decoders are the
// framework's (nn/rnn.hpp).
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/rnn.hpp>

#include <torch/nn/modules/embedding.h>

namespace attnlab::encoders::gru {

/// d2l Seq2SeqEncoder: embedding, L-layer GRU over the whole padded source (no packing, as d2l).
class GruEncoderImpl : public nn::Encoder {
 public:
  explicit GruEncoderImpl(const nn::GruOptions& options);
  /// src [B, S] ids, valid_lens [B] (passed through for the decoder's masking) ->
  /// states [B, S, H] (last layer, every step), hidden [L, B, H] (every layer, last step)
  nn::EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& valid_lens) override;
  int64_t output_size() const override { return options.num_hiddens(); }
  torch::nn::Embedding token_embedding() const override { return embedding; }

  nn::GruOptions options;
  torch::nn::Embedding embedding{nullptr};
  nn::FusedGru rnn{nullptr};
};
TORCH_MODULE(GruEncoder);

}  // namespace attnlab::encoders::gru
