#pragma once
// What the GRU plugins of d2l 0.17 (sections 9.7 and 10.4) share: encoder "gru", decoders "gru"
// and "gru_bahdanau" (their classes live in plugins/encoder/gru and plugins/decoder/{gru,
// gru_bahdanau}). Their sizes (GruOptions), the decoders' state, and the checks and GRU stack all
// three build on, batch-first.
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/fused_gru.hpp>

#include <cstdint>

namespace attnlab::nn {

struct GruOptions {
  GruOptions(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens, int64_t num_layers)
      : vocab_size_(vocab_size), embed_size_(embed_size), num_hiddens_(num_hiddens), num_layers_(num_layers) {}
  TORCH_ARG(int64_t, vocab_size);    // embedding rows (decoders: also the output size)
  TORCH_ARG(int64_t, embed_size);    // E
  TORCH_ARG(int64_t, num_hiddens);   // H, the GRU's hidden size
  TORCH_ARG(int64_t, num_layers);    // L, stacked GRU layers
  TORCH_ARG(double, dropout) = 0.0;  // between GRU layers (and on Bahdanau's attention weights)
  TORCH_ARG(bool, fused) = true;     // the fused CPU GRU (nn/fused_gru.hpp); false: at::gru always
};

/// Decoding state of the GRU decoders.
struct GruDecoderState : DecoderState {
  torch::Tensor hidden;   // [L, B, H] recurrent state; starts as the encoder's final state
  torch::Tensor context;  // [B, H] baseline decoder only: the encoder's final last-layer state
  int64_t steps = 0;      // incremental mode: target positions decoded so far (the next query's position)
};

/// Every size >= 1, else a c10::Error naming `who` ("GruEncoder", ...).
void check_gru_options(const char* who, const GruOptions& options);

/// The L-layer, batch-first GRU of hidden size H over inputs of `input_size` features, dropout
/// between layers (none with one layer): torch::nn::GRU's parameters and results, fused on CPU
/// unless options.fused() is false.
FusedGru make_gru(int64_t input_size, const GruOptions& options);

/// The decoders start from the encoder's final state: it must be [L, B, H] for this decoder.
void check_encoder_hidden(const char* who, const EncoderOutput& enc, const GruOptions& options);

/// `state` as the GruDecoderState it must be (made by a GRU decoder's init_state), else a c10::Error.
GruDecoderState& gru_state(const char* who, DecoderState& state);

}  // namespace attnlab::nn
