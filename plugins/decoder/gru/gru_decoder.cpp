// d2l 0.17's GRU decoder without attention (section 9.7).
#include "gru_decoder.hpp"

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/embedding.h>

namespace attnlab::decoders::gru {

GruDecoderImpl::GruDecoderImpl(const nn::GruOptions& opts) : options(opts) {
  nn::check_gru_options("GruDecoder", options);
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", nn::make_gru(options.embed_size() + options.num_hiddens(), options));
  dense = register_module("dense", torch::nn::Linear(options.num_hiddens(), options.vocab_size()));
}

std::unique_ptr<nn::DecoderState> GruDecoderImpl::init_state(const nn::EncoderOutput& enc, bool incremental) {
  nn::check_encoder_hidden("GruDecoder", enc, options);
  auto state = std::make_unique<nn::GruDecoderState>();
  state->encoder = enc;
  state->incremental = incremental;
  state->hidden = enc.hidden;       // [L, B, H]
  state->context = enc.hidden[-1];  // [B, H]
  return state;
}

torch::Tensor GruDecoderImpl::forward(const torch::Tensor& tgt, nn::DecoderState& base) {
  auto& state = nn::gru_state("GruDecoder", base);
  TORCH_CHECK(tgt.dim() == 2, "GruDecoder: expected tgt [B, T] token ids, found ", tgt.sizes());
  auto x = embedding->forward(tgt);                                                  // [B, T, E]
  auto context = state.context.unsqueeze(1).expand({-1, x.size(1), -1});             // [B, T, H]
  auto [outputs, hidden] = rnn->forward(torch::cat({x, context}, 2), state.hidden);  // [B, T, H], [L, B, H]
  if (state.incremental) state.hidden = hidden;
  return dense->forward(outputs);  // [B, T, V]
}

}  // namespace attnlab::decoders::gru
