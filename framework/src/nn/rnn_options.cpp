// Options shared by the GRU encoder and decoder plugins.
#include <attnlab/nn/rnn_options.hpp>

#include <utility>

namespace attnlab::nn {

config::Binding<GruConfig> gru_binding(bool with_attention) {
  auto b = config::Binding<GruConfig>()
               .option("embed_size", &GruConfig::embed_size, "token embedding width E", {.min = 1, .max = 65536})
               .option("num_hiddens", &GruConfig::num_hiddens, "GRU hidden size H (encoder and decoder must agree)",
                       {.min = 1, .max = 65536})
               .option("num_layers", &GruConfig::num_layers, "stacked GRU layers L (encoder and decoder must agree)",
                       {.min = 1, .max = 1000})
               .option("dropout", &GruConfig::dropout,
                       "dropout between GRU layers (and on Bahdanau's attention weights)", {.min = 0.0, .max = 1.0})
               .option("fused", &GruConfig::fused,
                       "fused CPU GRU (one autograd node per layer, gates in one pass); false: torch::nn::GRU's "
                       "kernel (at::gru). Same parameters either way, results equal up to float rounding; CUDA always "
                       "runs at::gru");
  if (with_attention) {
    auto attention = attention_option(AttentionRoles::Cross, kGruScorer);
    attention.description += "; the scorer sees queries and keys of size num_hiddens";
    b.unbound(std::move(attention));
  }
  return b;
}

GruOptions gru_options(const GruConfig& c, int64_t vocab_size) {
  return GruOptions(vocab_size, c.embed_size, c.num_hiddens, c.num_layers).dropout(c.dropout).fused(c.fused);
}

}  // namespace attnlab::nn
