// Options shared by the transformer encoder, decoder and seq2seq_regression plugins.
#include <attnlab/nn/transformer_options.hpp>

#include <fmt/format.h>

namespace attnlab::nn {

config::Binding<TransformerConfig> transformer_binding(AttentionRoles roles, const TransformerConfig& defaults) {
  using C = TransformerConfig;
  return config::Binding<C>(defaults)
      .option("num_hiddens", &C::num_hiddens, "model width H (embedding, attention, residual stream)",
              {.min = 1, .max = 65536})
      .option("ffn_num_hiddens", &C::ffn_num_hiddens, "inner width of the position-wise FFN",
              {.min = 1, .max = 1 << 20})
      .option("num_heads", &C::num_heads, "attention heads; must divide num_hiddens", {.min = 1, .max = 1024})
      .option("num_blks", &C::num_blks, "number of transformer blocks", {.min = 1, .max = 1000})
      .option("kv_heads", &C::kv_heads,
              "key/value heads, shared by groups of query heads: null = num_heads (multi-head attention), a "
              "divisor of num_heads = grouped-query attention (Ainslie et al. 2023), 1 = multi-query (Shazeer "
              "2019); every attention of the module (in a decoder, self- and cross-attention both)",
              {.min = 1, .max = 1024})
      .option(
          "dropout", &C::dropout,
          "dropout on positional encoding, residual branches and (unless attention_dropout is set) attention weights",
          {.min = 0.0, .max = 1.0})
      .option("attention_dropout", &C::attention_dropout,
              "dropout on the attention weights alone (fairseq's attention_dropout); null: the dropout above",
              {.min = 0.0, .max = 1.0})
      .option("bias", &C::bias, "bias in the attention projections W_q/W_k/W_v/W_o")
      .choice("norm", &C::norm, {{"first", NormPlacement::First}, {"last", NormPlacement::Last}},
              "layer norm placement: last = d2l AddNorm ln(x + f(x)); first = x + f(ln(x)) and a final LayerNorm")
      .option("max_len", &C::max_len, "longest sequence the positional encoding covers", {.min = 1, .max = 1000000})
      .choice("positional_encoding", &C::positional_encoding,
              {{"auto", AbsolutePositions::Auto},
               {"sinusoidal", AbsolutePositions::Sinusoidal},
               {"learned", AbsolutePositions::Learned},
               {"none", AbsolutePositions::None}},
              "what is added to the scaled embeddings: sinusoidal (d2l's); learned (a trained table of max_len rows, "
              "BERT's and GPT-2's); none (positions come from the scorer alone, or not at all: NoPE); auto: none "
              "when the self-attention scorer encodes positions itself (rope, alibi, t5_bias, shaw), else sinusoidal")
      .option("ffn_dropout", &C::ffn_dropout, "dropout after the FFN's ReLU (Step-by-Step's layers; d2l has none)",
              {.min = 0.0, .max = 1.0})
      .option("fused", &C::fused,
              "fused CPU kernels (residual + dropout + layer norm in one pass, and norm-first's layer norms and the "
              "stacks' final one as one node each; the attention core, masked softmax + dropout + weighted sum, as "
              "one autograd node; their own dropout stream; the linear layers, the heads' split and merge included, "
              "as one node each); false: the reference composition of torch ops")
      .unbound(attention_option(roles, kTransformerScorer));
}

config::Binding<TransformerVariantConfig> transformer_variant_binding(const TransformerVariantConfig& defaults) {
  using V = TransformerVariantConfig;
  return config::Binding<V>(defaults)
      .choice("init", &V::init,
              {{"default", TransformerInit::Default},
               {"glorot_uniform", TransformerInit::GlorotUniform},
               {"fairseq", TransformerInit::Fairseq},
               {"gpt2", TransformerInit::Gpt2}},
              "default: LibTorch's initialisation, d2l's (embeddings normal(0, 1): once scaled by "
              "sqrt(num_hiddens) they drown the positional encoding; for translation, prefer glorot_uniform, "
              "+8 BLEU on Multi30K, docs/EXPERIMENTS.md); glorot_uniform: Keras's defaults "
              "(Glorot-uniform kernels, also per head; zero biases; embeddings uniform(-0.05, 0.05)); fairseq: "
              "the same kernels and biases, embeddings normal(0, num_hiddens^-1/2), unit scale once scaled by "
              "sqrt(num_hiddens); gpt2: GPT-2's (weights and embeddings normal(0, 0.02), biases zero, the layers "
              "that write into the residual stream, W_o and the FFN's second, normal(0, 0.02 / sqrt(2 num_blks)))")
      .choice("activation", &V::activation,
              {{"relu", Activation::ReLU},
               {"gelu", Activation::GELU},
               {"gelu_tanh", Activation::GELUTanh},
               {"swiglu", Activation::SwiGLU}},
              "the FFN's nonlinearity: relu (d2l, Vaswani et al.), gelu (exact, with erf; BERT), gelu_tanh "
              "(its tanh approximation, GPT-2's) or swiglu (Shazeer 2020, Llama's MLP: dense2(silu(gate(x)) * "
              "dense1(x)), a third layer `gate`; its layers have biases only with bias: true)")
      .option("layer_norm_eps", &V::layer_norm_eps, "epsilon of every LayerNorm or RMSNorm (TF lab: 1e-6)",
              {.min = 0.0})
      .choice("norm_type", &V::norm_type, {{"layer", NormType::Layer}, {"rms", NormType::RMS}},
              "every norm of the stack, the final one too: layer (LayerNorm) or rms (RMSNorm, Zhang & Sennrich "
              "2019, Llama's: weight only, computed in float32; not one of the fused kernels)")
      .choice("ffn", &V::ffn_conv1d, {{"linear", false}, {"conv1d", true}},
              "position-wise FFN layers: linear, or kernel-size-1 Conv1d (TF lab; the same function)")
      .option("per_head_projections", &V::per_head_projections,
              "W_q/W_k/W_v stored per head as [heads, num_hiddens, num_hiddens / heads] (TF lab) instead of fused");
}

config::Binding<TransformerDecoderVariantConfig> transformer_decoder_variant_binding(
    const TransformerDecoderVariantConfig& defaults) {
  using D = TransformerDecoderVariantConfig;
  return config::Binding<D>(defaults)
      .include(transformer_variant_binding(defaults))
      .option("tie_embeddings", &D::tie_embeddings,
              "output projection = the target embedding transposed (shared weight, no output bias)")
      .choice("output", &D::output_softmax, {{"logits", false}, {"softmax", true}},
              "what forward returns: logits, or softmax probabilities (TF lab; losses take their log)")
      .option("kv_cache", &D::kv_cache,
              "incremental decoding (translation, beam search) keeps each block's projected keys and values and "
              "projects the encoder's states once; false: d2l's cache of the blocks' inputs, projected again at "
              "every step (the same output, slower; for comparison)");
}

TransformerOptions transformer_options(const config::Options& o, const TransformerConfig& c, int64_t vocab_size) {
  if (c.num_hiddens % c.num_heads != 0) {
    transformer_binding(AttentionRoles::Self)
        .fail(o, &TransformerConfig::num_heads,
              fmt::format("{} heads do not divide num_hiddens {}", c.num_heads, c.num_hiddens));
  }
  if (c.kv_heads && c.num_heads % *c.kv_heads != 0) {
    transformer_binding(AttentionRoles::Self)
        .fail(o, &TransformerConfig::kv_heads,
              fmt::format("kv_heads {} does not divide num_heads {}: each key/value head serves a group of "
                          "num_heads / kv_heads query heads",
                          *c.kv_heads, c.num_heads));
  }
  return TransformerOptions(vocab_size, c.num_hiddens, c.ffn_num_hiddens, c.num_heads, c.num_blks)
      .kv_heads(c.kv_heads.value_or(0))
      .dropout(c.dropout)
      .attention_dropout(c.attention_dropout)
      .bias(c.bias)
      .norm(c.norm)
      .max_len(c.max_len)
      .positional_encoding(c.positional_encoding)
      .ffn_dropout(c.ffn_dropout)
      .fused(c.fused);
}

TransformerOptions& apply_variant_options(const TransformerVariantConfig& v, TransformerOptions& options) {
  return options.init(v.init)
      .activation(v.activation)
      .norm_type(v.norm_type)
      .layer_norm_eps(v.layer_norm_eps)
      .ffn_conv1d(v.ffn_conv1d)
      .per_head_projections(v.per_head_projections);
}

TransformerOptions& apply_variant_options(const TransformerDecoderVariantConfig& v, TransformerOptions& options) {
  apply_variant_options(static_cast<const TransformerVariantConfig&>(v), options);
  return options.tie_embeddings(v.tie_embeddings).output_softmax(v.output_softmax).kv_cache(v.kv_cache);
}

}  // namespace attnlab::nn
