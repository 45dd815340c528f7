#pragma once
// Config side of the GRU plugins (encoder "gru", decoders "gru" and "gru_bahdanau"): the option
// schema they share and its mapping onto GruOptions.
#include <attnlab/config/schema.hpp>
#include <attnlab/nn/rnn.hpp>
#include <attnlab/nn/scorer_options.hpp>

namespace attnlab::nn {

/// embed_size, num_hiddens, num_layers, dropout (d2l 0.17 section 10.4's values as defaults).
/// with_attention adds `attention: {scorer: ..., cross_scorer: ...}` (default additive; the only
/// attention is cross-attention) for gru_bahdanau: attention_option(AttentionRoles::Cross, kGruScorer).
config::Schema gru_schema(bool with_attention);

/// The Bahdanau decoder's default scorer: "additive".
inline constexpr const char* kGruScorer = "additive";

/// Validated options + vocabulary size -> GruOptions.
GruOptions gru_options(const config::Options& options, int64_t vocab_size);

}  // namespace attnlab::nn
