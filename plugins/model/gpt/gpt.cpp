// Model plugin "gpt": a decoder-only transformer language model (GPT-2's shape: learned or any
// positions, norm-first blocks of causal self-attention and a GELU MLP, a final LayerNorm, an output
// layer tied to the token embedding). It maps its options onto nn::TransformerLM, the framework's
// transformer decoder without cross-attention, so every scorer, kv_heads, the KV cache, the fused
// CPU paths, head masks and the recorder work on it as on the translation models. Trained by the
// "lm" trainer.
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_lm.hpp>
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {
using namespace attnlab;

struct Config : nn::TransformerConfig, nn::TransformerDecoderVariantConfig {
  bool attention_only = false;
  bool scale_embeddings = false;
  bool output_bias = false;
};

const config::Binding<Config>& binding() {
  static const auto b = [] {
    nn::TransformerDecoderVariantConfig gpt2;  // GPT-2's init, GELU, tied output layer
    gpt2.init = nn::TransformerInit::Gpt2;
    gpt2.activation = nn::Activation::GELU;
    gpt2.tie_embeddings = true;
    return config::Binding<Config>()
        .include(nn::transformer_binding(nn::AttentionRoles::Self, {.num_hiddens = 128,
                                                                    .ffn_num_hiddens = 512,
                                                                    .num_heads = 4,
                                                                    .num_blks = 4,
                                                                    .dropout = 0.1,
                                                                    .bias = true,
                                                                    .norm = nn::NormPlacement::First,
                                                                    .max_len = 1024}))
        .include(nn::transformer_decoder_variant_binding(gpt2))
        .option("attention_only", &Config::attention_only,
                "blocks of attention alone, no MLP (Elhage et al. 2021's attention-only transformers)")
        .option("scale_embeddings", &Config::scale_embeddings,
                "multiply the token embeddings by sqrt(num_hiddens) before the positions are added (d2l's "
                "transformer); GPT-2 does not")
        .option("output_bias", &Config::output_bias,
                "a bias in the output layer when it is not tied to the embedding (nanoGPT's lm_head has none)");
  }();
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Model> make(const config::Options& o, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.tgt_vocab_size > 0, ConfigError,
                "{}: {} is a language model over tokens, but the dataset reports no vocabulary (use a token "
                "dataset, e.g. text or lm_tasks)",
                o.resolved().where(), o.owner());
  const Config c = binding().read(o);
  if (c.output_softmax) {
    binding().fail(o, &Config::output_softmax, "a language model returns logits (the lm trainer's loss takes them)");
  }
  auto opts = nn::transformer_options(o, c, ctx.data.tgt_vocab_size);
  nn::apply_variant_options(static_cast<const nn::TransformerDecoderVariantConfig&>(c), opts);
  opts.ffn(!c.attention_only).scale_embeddings(c.scale_embeddings).output_bias(c.output_bias);
  auto scorers = nn::registry_scorer_factory(o, ctx, nn::AttentionRoles::Self, nn::kTransformerScorer);
  return std::make_shared<nn::TransformerLMImpl>(opts, scorers);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Model, "gpt",
               "decoder-only transformer language model (GPT-2's shape; any scorer, attention-only, tied output, "
               "KV cache)",
               schema, make)
