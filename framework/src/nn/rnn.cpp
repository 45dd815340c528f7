// GRU encoder, plain GRU decoder and Bahdanau attention decoder (d2l 0.17, 9.7 and 10.4).
#include <attnlab/nn/rnn.hpp>

#include <torch/torch.h>

namespace attnlab::nn {
namespace {

void check_options(const char* who, const GruOptions& o) {
  TORCH_CHECK(o.vocab_size() >= 1 && o.embed_size() >= 1 && o.num_hiddens() >= 1 && o.num_layers() >= 1, who,
              ": vocab_size, embed_size, num_hiddens and num_layers must be >= 1, found ", o.vocab_size(), ", ",
              o.embed_size(), ", ", o.num_hiddens(), " and ", o.num_layers());
}

torch::nn::GRU make_gru(int64_t input_size, const GruOptions& o) {
  // torch only applies GRU dropout between layers (and warns when there is one layer).
  return torch::nn::GRU(torch::nn::GRUOptions(input_size, o.num_hiddens())
                            .num_layers(o.num_layers())
                            .dropout(o.num_layers() > 1 ? o.dropout() : 0.0)
                            .batch_first(true));
}

/// The decoders start from the encoder's final state: it must be [L, B, H] for this decoder.
void check_encoder_hidden(const char* who, const EncoderOutput& enc, const GruOptions& o) {
  TORCH_CHECK(enc.hidden.defined(), who, ": needs the encoder's final recurrent state [", o.num_layers(), ", B, ",
              o.num_hiddens(), "] (an RNN encoder such as 'gru'), but the encoder returned none");
  TORCH_CHECK(enc.hidden.dim() == 3 && enc.hidden.size(0) == o.num_layers() && enc.hidden.size(2) == o.num_hiddens(),
              who, ": expected the encoder's final state [", o.num_layers(), ", B, ", o.num_hiddens(),
              "] (same num_layers and num_hiddens as the encoder), found ", enc.hidden.sizes());
}

GruDecoderState& gru_state(const char* who, DecoderState& state) {
  auto* s = dynamic_cast<GruDecoderState*>(&state);
  TORCH_CHECK(s != nullptr, who, ": the state does not come from this decoder's init_state()");
  return *s;
}

}  // namespace

GruEncoderImpl::GruEncoderImpl(const GruOptions& opts) : options(opts) {
  check_options("GruEncoder", options);
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", make_gru(options.embed_size(), options));
}

EncoderOutput GruEncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& valid_lens) {
  TORCH_CHECK(src.dim() == 2, "GruEncoder: expected src [B, S] token ids, found ", src.sizes());
  auto x = embedding->forward(src);          // [B, S, E]
  auto [outputs, hidden] = rnn->forward(x);  // [B, S, H], [L, B, H]
  EncoderOutput out;
  out.states = outputs;
  out.valid_lens = valid_lens;
  out.hidden = hidden;
  return out;
}

// ------------------------------------------------------------------------------------ GRU decoder

GruDecoderImpl::GruDecoderImpl(const GruOptions& opts) : options(opts) {
  check_options("GruDecoder", options);
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", make_gru(options.embed_size() + options.num_hiddens(), options));
  dense = register_module("dense", torch::nn::Linear(options.num_hiddens(), options.vocab_size()));
}

std::unique_ptr<DecoderState> GruDecoderImpl::init_state(const EncoderOutput& enc, bool incremental) {
  check_encoder_hidden("GruDecoder", enc, options);
  auto state = std::make_unique<GruDecoderState>();
  state->encoder = enc;
  state->incremental = incremental;
  state->hidden = enc.hidden;       // [L, B, H]
  state->context = enc.hidden[-1];  // [B, H]
  return state;
}

torch::Tensor GruDecoderImpl::forward(const torch::Tensor& tgt, DecoderState& base) {
  auto& state = gru_state("GruDecoder", base);
  TORCH_CHECK(tgt.dim() == 2, "GruDecoder: expected tgt [B, T] token ids, found ", tgt.sizes());
  auto x = embedding->forward(tgt);                                                  // [B, T, E]
  auto context = state.context.unsqueeze(1).expand({-1, x.size(1), -1});             // [B, T, H]
  auto [outputs, hidden] = rnn->forward(torch::cat({x, context}, 2), state.hidden);  // [B, T, H], [L, B, H]
  if (state.incremental) state.hidden = hidden;
  return dense->forward(outputs);  // [B, T, V]
}

// ------------------------------------------------------------------------------- Bahdanau decoder

GruBahdanauDecoderImpl::GruBahdanauDecoderImpl(const GruOptions& opts, std::shared_ptr<Scorer> scorer) : options(opts) {
  check_options("GruBahdanauDecoder", options);
  attention_pool = register_module("attention", Attention(std::move(scorer), options.dropout()));
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.embed_size()));
  rnn = register_module("rnn", make_gru(options.num_hiddens() + options.embed_size(), options));
  dense = register_module("dense", torch::nn::Linear(options.num_hiddens(), options.vocab_size()));
}

std::unique_ptr<DecoderState> GruBahdanauDecoderImpl::init_state(const EncoderOutput& enc, bool incremental) {
  check_encoder_hidden("GruBahdanauDecoder", enc, options);
  TORCH_CHECK(enc.states.dim() == 3 && enc.states.size(2) == options.num_hiddens(),
              "GruBahdanauDecoder: expected encoder states [B, S, ", options.num_hiddens(), "], found ",
              enc.states.sizes());
  auto state = std::make_unique<GruDecoderState>();
  state->encoder = enc;
  state->incremental = incremental;
  state->hidden = enc.hidden;  // [L, B, H]
  return state;
}

torch::Tensor GruBahdanauDecoderImpl::forward(const torch::Tensor& tgt, DecoderState& base) {
  auto& state = gru_state("GruBahdanauDecoder", base);
  TORCH_CHECK(tgt.dim() == 2, "GruBahdanauDecoder: expected tgt [B, T] token ids, found ", tgt.sizes());
  const auto& enc = state.encoder.states;       // [B, S, H]: keys and values
  auto x = embedding->forward(tgt);             // [B, T, E]
  auto hidden = state.hidden;                   // [L, B, H]
  std::vector<torch::Tensor> outputs, weights;  // each [B, 1, H] / [B, 1, S]
  outputs.reserve(x.size(1));
  const int64_t offset = state.incremental ? state.steps : 0;  // target position of step 0
  for (int64_t t = 0; t < x.size(1); ++t) {
    auto query = hidden[-1].unsqueeze(1);  // [B, 1, H]
    auto context =
        attention_pool->forward(query, enc, enc, state.encoder.valid_lens, Positions{offset + t, 0});  // [B, 1, H]
    auto input = torch::cat({context, x.narrow(1, t, 1)}, -1);  // [B, 1, H + E]
    auto [out, next] = rnn->forward(input, hidden);              // [B, 1, H], [L, B, H]
    hidden = next;
    outputs.push_back(out);
    if (recording_) weights.push_back(attention_pool->weights());
  }
  if (state.incremental) {
    state.hidden = hidden;
    state.steps += x.size(1);
  }
  weights_ = weights.empty() ? torch::Tensor() : torch::cat(weights, 1).unsqueeze(0).unsqueeze(2);  // [1, B, 1, T, S]
  return dense->forward(torch::cat(outputs, 1));                                                    // [B, T, V]
}

void GruBahdanauDecoderImpl::set_recording(bool on) {
  recording_ = on;
  attention_pool->set_recording(on);
  if (!on) weights_ = torch::Tensor();
}

AttentionMap GruBahdanauDecoderImpl::attention() const {
  if (!weights_.defined()) return {};
  return {{"decoder_cross", weights_}};
}

}  // namespace attnlab::nn
