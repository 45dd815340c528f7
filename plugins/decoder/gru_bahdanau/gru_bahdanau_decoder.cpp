// d2l 0.17's GRU decoder with Bahdanau attention (section 10.4).
#include "gru_bahdanau_decoder.hpp"

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/embedding.h>

#include <vector>

namespace attnlab::decoders::gru_bahdanau {

GruBahdanauDecoderImpl::GruBahdanauDecoderImpl(const nn::GruOptions& opts, std::shared_ptr<nn::Scorer> scorer)
    : options(opts) {
  nn::check_gru_options("GruBahdanauDecoder", options);
  const nn::RecordAs cross{.module = nn::kDecoderCross, .queries = nn::Side::Target, .keys = nn::Side::Source};
  attention_pool = register_module("attention", nn::Attention(std::move(scorer), options.dropout(), cross));
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", nn::make_gru(options.num_hiddens() + options.embed_size(), options));
  dense = register_module("dense", torch::nn::Linear(options.num_hiddens(), options.vocab_size()));
}

std::unique_ptr<nn::DecoderState> GruBahdanauDecoderImpl::init_state(const nn::EncoderOutput& enc, bool incremental) {
  nn::check_encoder_hidden("GruBahdanauDecoder", enc, options);
  TORCH_CHECK(enc.states.dim() == 3 && enc.states.size(2) == options.num_hiddens(),
              "GruBahdanauDecoder: expected encoder states [B, S, ", options.num_hiddens(), "], found ",
              enc.states.sizes());
  auto state = std::make_unique<nn::GruDecoderState>();
  state->encoder = enc;
  state->incremental = incremental;
  state->hidden = enc.hidden;  // [L, B, H]
  return state;
}

torch::Tensor GruBahdanauDecoderImpl::forward(const torch::Tensor& tgt, nn::DecoderState& base) {
  auto& state = nn::gru_state("GruBahdanauDecoder", base);
  TORCH_CHECK(tgt.dim() == 2, "GruBahdanauDecoder: expected tgt [B, T] token ids, found ", tgt.sizes());
  const auto& enc = state.encoder.states;       // [B, S, H]: keys and values
  auto x = embedding->forward(tgt);             // [B, T, E]
  auto hidden = state.hidden;                   // [L, B, H]
  std::vector<torch::Tensor> outputs;           // each [B, 1, H]
  outputs.reserve(x.size(1));
  const int64_t offset = state.incremental ? state.steps : 0;  // target position of step 0
  for (int64_t t = 0; t < x.size(1); ++t) {
    auto query = hidden[-1].unsqueeze(1);  // [B, 1, H]
    auto context =
        attention_pool->forward(query, enc, enc, state.encoder.valid_lens, nn::Positions{offset + t, 0});  // [B, 1, H]
    auto input = torch::cat({context, x.narrow(1, t, 1)}, -1);  // [B, 1, H + E]
    auto [out, next] = rnn->forward(input, hidden);             // [B, 1, H], [L, B, H]
    hidden = next;
    outputs.push_back(out);
  }
  if (state.incremental) {
    state.hidden = hidden;
    state.steps += x.size(1);
  }
  return dense->forward(torch::cat(outputs, 1));  // [B, T, V]
}

}  // namespace attnlab::decoders::gru_bahdanau
