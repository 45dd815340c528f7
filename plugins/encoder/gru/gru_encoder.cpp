// d2l 0.17's GRU encoder (section 9.7).
#include "gru_encoder.hpp"

#include <torch/nn/modules/embedding.h>

namespace attnlab::encoders::gru {

GruEncoderImpl::GruEncoderImpl(const nn::GruOptions& opts) : options(opts) {
  nn::check_gru_options("GruEncoder", options);
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", nn::make_gru(options.embed_size(), options));
}

nn::EncoderOutput GruEncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& valid_lens) {
  TORCH_CHECK(src.dim() == 2, "GruEncoder: expected src [B, S] token ids, found ", src.sizes());
  auto x = embedding->forward(src);          // [B, S, E]
  auto [outputs, hidden] = rnn->forward(x);  // [B, S, H], [L, B, H]
  nn::EncoderOutput out;
  out.states = outputs;
  out.valid_lens = valid_lens;
  out.hidden = hidden;
  return out;
}

}  // namespace attnlab::encoders::gru
