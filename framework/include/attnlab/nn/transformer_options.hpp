#pragma once
// Config side of the transformer plugins: the option schema they share, its mapping onto
// TransformerOptions, and a ScorerFactory that asks the registry for the configured scorer.
#include <attnlab/config/schema.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/context.hpp>

#include <string>

namespace attnlab::nn {

/// num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, bias, norm, max_len, attention.
config::Schema transformer_schema();

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

/// Builds the scorer named by the `attention` option ({scorer: <name> | {plugin: <name>, ...}})
/// through ctx.registry, telling it the per-head query and key sizes. Validates the attention map
/// now (unknown keys are ConfigErrors with did-you-mean).
ScorerFactory registry_scorer_factory(const config::Options& options, const plugin::BuildContext& ctx);

}  // namespace attnlab::nn
