// Option schema shared by the transformer encoder and decoder plugins.
#include <attnlab/nn/transformer_options.hpp>

#include <fmt/format.h>

namespace attnlab::nn {

config::Schema transformer_schema(AttentionRoles roles) {
  using namespace config;
  return {
      opt_int("num_hiddens", 256, "model width H (embedding, attention, residual stream)", 1, 65536),
      opt_int("ffn_num_hiddens", 64, "inner width of the position-wise FFN", 1, 1 << 20),
      opt_int("num_heads", 4, "attention heads; must divide num_hiddens", 1, 1024),
      opt_int("num_blks", 2, "number of transformer blocks", 1, 1000),
      opt_float("dropout", 0.2, "dropout on positional encoding, attention weights and residual branches", 0.0, 1.0),
      opt_bool("bias", false, "bias in the attention projections W_q/W_k/W_v/W_o"),
      opt_enum("norm", "last", {"first", "last"},
               "layer norm placement: last = d2l AddNorm ln(x + f(x)); first = x + f(ln(x)) and a final LayerNorm"),
      opt_int("max_len", 1000, "longest sequence the positional encoding covers", 1, 1000000),
      opt_enum("positional_encoding", "sinusoidal", {"sinusoidal", "none"},
               "sinusoidal: d2l's, added to the scaled embeddings; none: nothing added, positions come from the "
               "scorer alone (ALiBi) or not at all"),
      opt_float("ffn_dropout", 0.0, "dropout after the FFN's ReLU (Step-by-Step's layers; d2l has none)", 0.0, 1.0),
      attention_option(roles, kTransformerScorer),
  };
}

TransformerOptions transformer_options(const config::Options& o, int64_t vocab_size) {
  const int64_t hiddens = o.get_int("num_hiddens"), heads = o.get_int("num_heads");
  if (hiddens % heads != 0) o.fail("num_heads", fmt::format("{} heads do not divide num_hiddens {}", heads, hiddens));
  return TransformerOptions(vocab_size, hiddens, o.get_int("ffn_num_hiddens"), heads, o.get_int("num_blks"))
      .dropout(o.get_float("dropout"))
      .bias(o.get_bool("bias"))
      .norm(o.get_string("norm") == "first" ? NormPlacement::First : NormPlacement::Last)
      .max_len(o.get_int("max_len"))
      .positional_encoding(o.get_string("positional_encoding") == "sinusoidal")
      .ffn_dropout(o.get_float("ffn_dropout"));
}

config::Schema transformer_variant_schema(bool decoder) {
  using namespace config;
  Schema s = {
      opt_enum("init", "default", {"default", "glorot_uniform"},
               "default: LibTorch's initialisation; glorot_uniform: Keras's defaults (Glorot-uniform kernels, also per "
               "head; zero biases; embeddings uniform(-0.05, 0.05))"),
      opt_float("layer_norm_eps", 1e-5, "epsilon of every LayerNorm (TF lab: 1e-6)", 0.0),
      opt_enum("ffn", "linear", {"linear", "conv1d"},
               "position-wise FFN layers: linear, or kernel-size-1 Conv1d (TF lab; the same function)"),
      opt_bool("per_head_projections", false,
               "W_q/W_k/W_v stored per head as [heads, num_hiddens, num_hiddens / heads] (TF lab) instead of fused"),
  };
  if (decoder) {
    s.push_back(opt_bool("tie_embeddings", false,
                         "output projection = the target embedding transposed (shared weight, no output bias)"));
    s.push_back(opt_enum("output", "logits", {"logits", "softmax"},
                         "what forward returns: logits, or softmax probabilities (TF lab; losses take their log)"));
  }
  return s;
}

TransformerOptions& apply_variant_options(const config::Options& o, TransformerOptions& options, bool decoder) {
  options.init(o.get_string("init") == "glorot_uniform" ? TransformerInit::GlorotUniform : TransformerInit::Default)
      .layer_norm_eps(o.get_float("layer_norm_eps"))
      .ffn_conv1d(o.get_string("ffn") == "conv1d")
      .per_head_projections(o.get_bool("per_head_projections"));
  if (decoder) options.tie_embeddings(o.get_bool("tie_embeddings")).output_softmax(o.get_string("output") == "softmax");
  return options;
}

}  // namespace attnlab::nn
