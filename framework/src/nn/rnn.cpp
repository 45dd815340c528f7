// What the GRU encoder and decoder plugins share (d2l 0.17, 9.7 and 10.4).
#include <attnlab/nn/rnn.hpp>

#include <torch/types.h>

namespace attnlab::nn {

void check_gru_options(const char* who, const GruOptions& o) {
  TORCH_CHECK(o.vocab_size() >= 1 && o.embed_size() >= 1 && o.num_hiddens() >= 1 && o.num_layers() >= 1, who,
              ": vocab_size, embed_size, num_hiddens and num_layers must be >= 1, found ", o.vocab_size(), ", ",
              o.embed_size(), ", ", o.num_hiddens(), " and ", o.num_layers());
}

FusedGru make_gru(int64_t input_size, const GruOptions& o) {
  // GRU dropout only applies between layers (torch warns when there is one layer).
  return FusedGru(FusedGruOptions(input_size, o.num_hiddens())
                      .num_layers(o.num_layers())
                      .dropout(o.num_layers() > 1 ? o.dropout() : 0.0)
                      .batch_first(true)
                      .fused(o.fused()));
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

}  // namespace attnlab::nn
