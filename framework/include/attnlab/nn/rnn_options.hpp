#pragma once
// Config side of the GRU plugins (encoder "gru", decoders "gru" and "gru_bahdanau"): the options
// they share, bound to a struct, and its mapping onto GruOptions.
#include <attnlab/config/binding.hpp>
#include <attnlab/nn/rnn.hpp>
#include <attnlab/nn/scorer_options.hpp>

namespace attnlab::nn {

/// The GRU plugins' options (d2l 0.17 section 10.4's values as defaults).
struct GruConfig {
  int64_t embed_size = 32;
  int64_t num_hiddens = 32;
  int64_t num_layers = 2;
  double dropout = 0.1;
  bool fused = true;
};

/// Their binding (config/binding.hpp). with_attention adds `attention: {scorer: ..., cross_scorer:
/// ...}` (default additive; the only attention is cross-attention) for gru_bahdanau:
/// attention_option(AttentionRoles::Cross, kGruScorer), read by registry_scorer_factory.
config::Binding<GruConfig> gru_binding(bool with_attention);

/// The Bahdanau decoder's default scorer: "additive".
inline constexpr const char* kGruScorer = "additive";

/// The config + vocabulary size -> GruOptions.
GruOptions gru_options(const GruConfig& c, int64_t vocab_size);

}  // namespace attnlab::nn
