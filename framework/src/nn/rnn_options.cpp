// Option schema shared by the GRU encoder and decoder plugins.
#include <attnlab/nn/rnn_options.hpp>

#include <utility>

namespace attnlab::nn {

config::Schema gru_schema(bool with_attention) {
  using namespace config;
  Schema s{
      opt_int("embed_size", 32, "token embedding width E", 1, 65536),
      opt_int("num_hiddens", 32, "GRU hidden size H (encoder and decoder must agree)", 1, 65536),
      opt_int("num_layers", 2, "stacked GRU layers L (encoder and decoder must agree)", 1, 1000),
      opt_float("dropout", 0.1, "dropout between GRU layers (and on Bahdanau's attention weights)", 0.0, 1.0),
  };
  if (with_attention) {
    auto attention = attention_option(AttentionRoles::Cross, kGruScorer);
    attention.description += "; the scorer sees queries and keys of size num_hiddens";
    s.push_back(std::move(attention));
  }
  return s;
}

GruOptions gru_options(const config::Options& o, int64_t vocab_size) {
  return GruOptions(vocab_size, o.get_int("embed_size"), o.get_int("num_hiddens"), o.get_int("num_layers"))
      .dropout(o.get_float("dropout"));
}

}  // namespace attnlab::nn
