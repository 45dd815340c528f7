#pragma once
// Config side of the transformer plugins: the options they share, bound to structs
// (config/binding.hpp), and their mapping onto TransformerOptions (scorers: nn/scorer_options.hpp).
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/nn/scorer_options.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/context.hpp>

#include <optional>
#include <string>

namespace attnlab::nn {

/// The transformer plugins' default scorer: "dot_product".
inline constexpr const char* kTransformerScorer = "dot_product";

/// The options every transformer plugin has (encoder, decoder, seq2seq_regression), as fields
/// named as in the config; the defaults are the encoder's and decoder's.
struct TransformerConfig {
  int64_t num_hiddens = 256;
  int64_t ffn_num_hiddens = 64;
  int64_t num_heads = 4;
  int64_t num_blks = 2;
  std::optional<int64_t> kv_heads = std::nullopt;  // null: num_heads (multi-head); 1: multi-query
  double dropout = 0.2;
  std::optional<double> attention_dropout = std::nullopt;  // null: dropout
  bool bias = false;
  NormPlacement norm = NormPlacement::Last;
  int64_t max_len = 1000;
  AbsolutePositions positional_encoding = AbsolutePositions::Auto;  // auto | sinusoidal | learned | none
  double ffn_dropout = 0.0;
  bool fused = true;  // add & norm and the attention core as fused CPU kernels; false: the composition of torch ops
};

/// Their binding (config/binding.hpp), with the `attention` option for `roles` (an encoder has
/// Self, a decoder SelfAndCross; read by registry_scorer_factory). `defaults` are the plugin's.
config::Binding<TransformerConfig> transformer_binding(AttentionRoles roles, const TransformerConfig& defaults = {});

/// The TF-lab variant options of the transformer encoder/decoder plugins (seed 004). Apart from
/// TransformerConfig so that plugins reusing that keep their own `init` option.
struct TransformerVariantConfig {
  TransformerInit init = TransformerInit::Default;  // default | glorot_uniform | fairseq | gpt2
  double layer_norm_eps = 1e-5;              // every norm's epsilon (RMSNorm's too)
  Activation activation = Activation::ReLU;  // relu | gelu | gelu_tanh | swiglu
  NormType norm_type = NormType::Layer;      // norm_type: layer | rms
  bool ffn_conv1d = false;  // ffn: linear | conv1d
  bool per_head_projections = false;
};
config::Binding<TransformerVariantConfig> transformer_variant_binding(const TransformerVariantConfig& defaults = {});

/// The decoder's variant options: those and tie_embeddings, output (logits|softmax).
struct TransformerDecoderVariantConfig : TransformerVariantConfig {
  bool tie_embeddings = false;
  bool output_softmax = false;  // output: logits | softmax
  bool kv_cache = true;         // incremental decoding keeps projected keys and values
};
/// `defaults`: the plugin's (the gpt model's are GPT-2's).
config::Binding<TransformerDecoderVariantConfig> transformer_decoder_variant_binding(
    const TransformerDecoderVariantConfig& defaults = {});

/// The config + vocabulary size -> TransformerOptions. ConfigError at num_heads' place (in `o`,
/// the options the config was read from) when num_heads does not divide num_hiddens, at
/// kv_heads' when kv_heads does not divide num_heads.
TransformerOptions transformer_options(const config::Options& o, const TransformerConfig& c, int64_t vocab_size);

/// The variant options onto `options`.
TransformerOptions& apply_variant_options(const TransformerVariantConfig& v, TransformerOptions& options);
TransformerOptions& apply_variant_options(const TransformerDecoderVariantConfig& v, TransformerOptions& options);

}  // namespace attnlab::nn
