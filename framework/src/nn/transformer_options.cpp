// Option schema and scorer lookup shared by the transformer encoder and decoder plugins.
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/registry.hpp>

#include <fmt/format.h>

namespace attnlab::nn {
namespace {

config::Schema attention_schema() {
  return {config::opt_node("scorer", config::Type::Any, "dot_product",
                           "scorer plugin: a name, or a map {plugin: <name>, ...its options}")};
}

}  // namespace

config::Schema transformer_schema() {
  using namespace config;
  return {
      opt_int("num_hiddens", 256, "model width H (embedding, attention, residual stream)", 1),
      opt_int("ffn_num_hiddens", 64, "inner width of the position-wise FFN", 1),
      opt_int("num_heads", 4, "attention heads; must divide num_hiddens", 1),
      opt_int("num_blks", 2, "number of transformer blocks", 1),
      opt_float("dropout", 0.2, "dropout on positional encoding, attention weights and residual branches", 0.0, 1.0),
      opt_bool("bias", false, "bias in the attention projections W_q/W_k/W_v/W_o"),
      opt_enum("norm", "last", {"first", "last"},
               "layer norm placement: last = d2l AddNorm ln(x + f(x)); first = x + f(ln(x)) and a final LayerNorm"),
      opt_int("max_len", 1000, "longest sequence the positional encoding covers", 1),
      opt_node("attention", Type::Map, "{scorer: dot_product}",
               "attention settings: {scorer: <name> | {plugin: <name>, ...}}"),
  };
}

TransformerOptions transformer_options(const config::Options& o, int64_t vocab_size) {
  const int64_t hiddens = o.get_int("num_hiddens"), heads = o.get_int("num_heads");
  if (hiddens % heads != 0) o.fail("num_heads", fmt::format("{} heads do not divide num_hiddens {}", heads, hiddens));
  return TransformerOptions(vocab_size, hiddens, o.get_int("ffn_num_hiddens"), heads, o.get_int("num_blks"))
      .dropout(o.get_float("dropout"))
      .bias(o.get_bool("bias"))
      .norm(o.get_string("norm") == "first" ? NormPlacement::First : NormPlacement::Last)
      .max_len(o.get_int("max_len"));
}

ScorerFactory registry_scorer_factory(const config::Options& o, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.registry != nullptr, PluginError, "{}: {} needs a plugin registry to create its scorer",
                o.resolved().where(), o.owner());
  config::Options attention(o.node("attention"), attention_schema(), o.owner() + " attention", {});
  config::Node scorer = attention.node("scorer");
  return [scorer, ctx](int64_t query_size, int64_t key_size) {
    plugin::BuildContext sized = ctx;
    sized.query_size = query_size;
    sized.key_size = key_size;
    return ctx.registry->create<Scorer>(scorer, sized);
  };
}

}  // namespace attnlab::nn
