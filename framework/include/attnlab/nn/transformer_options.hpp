#pragma once
// Config side of the transformer plugins: the option schema they share and its mapping onto
// TransformerOptions (their scorers: nn/scorer_options.hpp).
#include <attnlab/config/schema.hpp>
#include <attnlab/nn/scorer_options.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/context.hpp>

#include <string>

namespace attnlab::nn {

/// The transformer plugins' default scorer: "dot_product".
inline constexpr const char* kTransformerScorer = "dot_product";

/// num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, bias, norm, max_len, attention
/// (attention_option(roles, kTransformerScorer): an encoder has Self, a decoder SelfAndCross).
config::Schema transformer_schema(AttentionRoles roles);

/// The TF-lab variant options of the transformer encoder/decoder plugins (seed 004): init
/// (default|glorot_uniform), layer_norm_eps, ffn (linear|conv1d), per_head_projections, and for
/// the decoder also tie_embeddings and output (logits|softmax). Kept apart from
/// transformer_schema() so that plugins reusing that schema keep their own `init` option.
config::Schema transformer_variant_schema(bool decoder);

/// Reads the transformer_variant_schema(decoder) options into `options`.
TransformerOptions& apply_variant_options(const config::Options& o, TransformerOptions& options, bool decoder);

/// Validated options + vocabulary size -> TransformerOptions. ConfigError at the option's place
/// when num_heads does not divide num_hiddens.
TransformerOptions transformer_options(const config::Options& options, int64_t vocab_size);

}  // namespace attnlab::nn
