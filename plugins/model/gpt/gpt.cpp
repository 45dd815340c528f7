// Model plugin "gpt": a decoder-only transformer language model (GPT-2's shape: learned or any
// positions, norm-first blocks of causal self-attention and a GELU MLP, a final LayerNorm, an output
// layer tied to the token embedding; or Llama's, with the options norm_type: rms, activation: swiglu,
// kv_heads and the rope scorer). It maps its options onto nn::TransformerLM, the framework's
// transformer decoder without cross-attention, so every scorer, kv_heads, the KV cache, the fused
// CPU paths, head masks and the recorder work on it as on the translation models. Trained by the
// "lm" trainer. `pretrained:` loads a Hugging Face GPT-2 or Llama folder (hf.hpp).
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_lm.hpp>
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

#include "hf.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

namespace {
using namespace attnlab;
using models::gpt::HfConfig;
using models::gpt::load_hf_weights;
using models::gpt::read_hf_config;

struct Config : nn::TransformerConfig, nn::TransformerDecoderVariantConfig {
  bool attention_only = false;
  bool scale_embeddings = false;
  bool output_bias = false;
  std::string pretrained;  // a Hugging Face model folder: its shape and weights
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
                "a bias in the output layer when it is not tied to the embedding (nanoGPT's lm_head has none)")
        .option("pretrained", &Config::pretrained,
                "a Hugging Face model folder (config.json + model.safetensors: GPT-2, Llama, Mistral without a "
                "sliding window): the model takes its shape, scorer and weights (docs/PRETRAINED.md); shape options "
                "given too must agree with config.json");
  }();
  return b;
}

config::Schema schema() { return binding().schema(); }

/// `field` takes config.json's `value` (`theirs`: its name and value there, or what GPT-2 has);
/// given in the experiment too, it must agree.
/// The value is recorded in the run's /config (`yaml`: its YAML text; numbers and booleans as fmt
/// writes them), so the stored experiment rebuilds this model.
template <class V, class C>
void take(const config::Options& o, Config& c, V C::*field, V value, const HfConfig& hf, const std::string& theirs,
          std::string yaml = {}) {
  const std::string& name = binding().name_of(field);
  if (o.given(name) && c.*field != value) {
    binding().fail(o, field, fmt::format("disagrees with the pretrained model: {} has {} (leave the option out)",
                                         hf.file, theirs));
  }
  if (c.*field == value) return;  // the option already says so
  c.*field = value;
  if constexpr (std::is_arithmetic_v<V>) {
    if (yaml.empty()) yaml = fmt::format("{}", value);
  }
  ATTNLAB_CHECK(!yaml.empty(), PluginError, "gpt: no YAML text to record for option {}", name);
  o.record(name, yaml);
}

/// The scorer name `attention` (an experiment's option) gives its self-attention: attention.scorer as
/// a name or a map's plugin, "" when it says none; `scorer` is set to that map, if it is one.
std::string scorer_name(const config::Node& attention, const config::Node** scorer) {
  const auto* s = attention.is_map() ? attention.find("scorer") : nullptr;
  const auto* plugin = s != nullptr && s->is_map() ? s->find("plugin") : nullptr;
  *scorer = s != nullptr && s->is_map() ? s : nullptr;
  return attention.is_scalar()                      ? attention.str()
         : s != nullptr && s->is_scalar()           ? s->str()
         : plugin != nullptr && plugin->is_scalar() ? plugin->str()
                                                    : "";
}

/// The scorer the pretrained model attends with: GPT-2 the scaled dot product (the default), Llama
/// RoPE of base rope_theta, recorded as attention: {scorer: {plugin: rope, base: theta}} (so that
/// make() and a rebuild from /config create it). An `attention` option given too must name the
/// same scorer (and base).
void take_scorer(const config::Options& o, const HfConfig& hf) {
  const config::Node* scorer = nullptr;
  const std::string name = o.given("attention") ? scorer_name(o.node("attention"), &scorer) : "";
  const std::string want = hf.rope_theta ? "rope" : nn::kTransformerScorer;
  if (o.given("attention")) {
    const auto* base = scorer != nullptr ? scorer->find("base") : nullptr;
    const bool same_base = !hf.rope_theta || (base != nullptr ? base->as_double() : 10000.0) == *hf.rope_theta;
    if (name != want || !same_base) {
      o.fail("attention",
             fmt::format("disagrees with the pretrained model: {} attends with {} (leave the option out)", hf.file,
                         hf.rope_theta ? fmt::format("rope, base rope_theta {}", *hf.rope_theta) : want));
    }
  }
  if (!hf.rope_theta) return;  // the default scorer
  const auto& loc = o.node("attention").location();
  config::Node rope = config::Node::map(loc);
  rope.set("plugin", config::Node::scalar("rope", loc));
  rope.set("base", config::Node::scalar(fmt::format("{}", *hf.rope_theta), loc));
  config::Node attention = config::Node::map(loc);
  attention.set("scorer", std::move(rope));
  o.record("attention", std::move(attention));
}

/// The pretrained folder's config.json onto `c` (GPT-2: bias, norm first, learned positions, tied
/// output; Llama: no biases, norm first with RMSNorm, SwiGLU, RoPE, grouped keys and values, an
/// output layer of its own unless tied); ConfigError where the experiment's own options disagree or
/// the dataset's vocabulary is not the model's.
HfConfig pretrained_shape(const config::Options& o, Config& c, int64_t vocab_size) {
  HfConfig hf = read_hf_config(c.pretrained);
  if (vocab_size != hf.vocab_size) {
    binding().fail(o, &Config::pretrained,
                   fmt::format("{} has vocab_size {}, but the dataset's vocabulary has {} tokens: use the model's "
                               "tokenizer (tokenizer: {{plugin: byte_bpe, path: {}}})",
                               hf.file, hf.vocab_size, vocab_size, hf.dir));
  }
  const std::string arch = hf.model_type == "gpt2" ? "GPT-2's" : "Llama's";
  // config.json's name for a field and its value, as messages quote it.
  const auto says = [](const char* key, const auto& value) { return fmt::format("{} {}", key, value); };
  take(o, c, &Config::num_hiddens, hf.num_hiddens, hf, says(hf.keys.num_hiddens, hf.num_hiddens));
  take(o, c, &Config::ffn_num_hiddens, hf.ffn_num_hiddens, hf, says(hf.keys.ffn_num_hiddens, hf.ffn_num_hiddens));
  take(o, c, &Config::num_heads, hf.num_heads, hf, says(hf.keys.num_heads, hf.num_heads));
  take(o, c, &Config::num_blks, hf.num_blks, hf, says(hf.keys.num_blks, hf.num_blks));
  take(o, c, &Config::max_len, hf.max_len, hf, says(hf.keys.max_len, hf.max_len));
  take(o, c, &Config::layer_norm_eps, hf.layer_norm_eps, hf, says(hf.keys.eps, hf.layer_norm_eps));
  take(o, c, &Config::tie_embeddings, hf.tie_embeddings, hf, says("tie_word_embeddings", hf.tie_embeddings));
  take(o, c, &Config::kv_heads, hf.kv_heads, hf,
       hf.kv_heads ? says("num_key_value_heads", *hf.kv_heads) : says(hf.keys.num_heads, hf.num_heads),
       hf.kv_heads ? fmt::format("{}", *hf.kv_heads) : "~");
  take(o, c, &Config::bias, hf.bias, hf, fmt::format("{} biases (bias: {})", arch, hf.bias));
  take(o, c, &Config::norm, nn::NormPlacement::First, hf, arch + " norm: first", "first");
  const bool rms = hf.norm_type == nn::NormType::RMS;
  take(o, c, &Config::norm_type, hf.norm_type, hf, fmt::format("{} norm_type: {}", arch, rms ? "rms" : "layer"),
       rms ? "rms" : "layer");
  const auto positions = hf.rope_theta ? nn::AbsolutePositions::None : nn::AbsolutePositions::Learned;
  const char* positions_yaml = hf.rope_theta ? "none" : "learned";
  take(o, c, &Config::positional_encoding, positions, hf,
       fmt::format("{} positions (positional_encoding: {})", arch, positions_yaml), positions_yaml);
  take(o, c, &Config::attention_only, false, hf, arch + " MLPs (attention_only: false)");
  take(o, c, &Config::scale_embeddings, false, hf, arch + " unscaled embeddings (scale_embeddings: false)");
  take(o, c, &Config::output_bias, false, hf, arch + " output layer without a bias (output_bias: false)");
  take(o, c, &Config::ffn_conv1d, false, hf, arch + " linear MLP (ffn: linear)");
  take(o, c, &Config::per_head_projections, false, hf, arch + " fused projections (per_head_projections: false)");
  const char* activation = hf.activation == nn::Activation::SwiGLU     ? "swiglu"
                           : hf.activation == nn::Activation::GELUTanh ? "gelu_tanh"
                           : hf.activation == nn::Activation::GELU     ? "gelu"
                                                                       : "relu";
  take(o, c, &Config::activation, hf.activation, hf, fmt::format("{} activation: {}", arch, activation), activation);
  take_scorer(o, hf);
  return hf;
}

std::shared_ptr<nn::Model> make(const config::Options& o, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.tgt_vocab_size > 0, ConfigError,
                "{}: {} is a language model over tokens, but the dataset reports no vocabulary (use a token "
                "dataset, e.g. text or lm_tasks)",
                o.resolved().where(), o.owner());
  Config c = binding().read(o);
  std::optional<HfConfig> hf;
  if (!c.pretrained.empty()) hf = pretrained_shape(o, c, ctx.data.tgt_vocab_size);
  if (c.output_softmax) {
    binding().fail(o, &Config::output_softmax, "a language model returns logits (the lm trainer's loss takes them)");
  }
  auto opts = nn::transformer_options(o, c, ctx.data.tgt_vocab_size);
  nn::apply_variant_options(static_cast<const nn::TransformerDecoderVariantConfig&>(c), opts);
  opts.ffn(!c.attention_only).scale_embeddings(c.scale_embeddings).output_bias(c.output_bias);
  auto scorers = nn::registry_scorer_factory(o, ctx, nn::AttentionRoles::Self, nn::kTransformerScorer);
  auto model = std::make_shared<nn::TransformerLMImpl>(opts, scorers);
  if (hf) load_hf_weights(*hf, *model);
  return model;
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Model, "gpt",
               "decoder-only transformer language model (GPT-2's shape; any scorer, attention-only, tied output, "
               "KV cache)",
               schema, make)
