// Encoder plugin "transformer": d2l 1.0.3's TransformerEncoder with any scorer and norm placement.
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>

namespace {

using namespace attnlab;

struct Config : nn::TransformerConfig, nn::TransformerVariantConfig {};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>()
                            .include(nn::transformer_binding(nn::AttentionRoles::Self))
                            .include(nn::transformer_variant_binding());
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Encoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.src_vocab_size > 0, ConfigError,
                "{}: {} embeds source token ids, but the dataset reports no source vocabulary "
                "(src_vocab_size {}; feature inputs need an encoder for continuous inputs)",
                options.resolved().where(), options.owner(), ctx.data.src_vocab_size);
  const Config c = binding().read(options);
  auto opts = nn::transformer_options(options, c, ctx.data.src_vocab_size);
  // Positions past max_len have no encoding: the dataset's padded length must fit, before training.
  if (ctx.data.num_steps > c.max_len) {
    nn::transformer_binding(nn::AttentionRoles::Self)
        .fail(options, &nn::TransformerConfig::max_len,
              fmt::format("max_len {} is shorter than the dataset's sequences ({} steps, dataset.num_steps)",
                          c.max_len, ctx.data.num_steps));
  }
  nn::apply_variant_options(static_cast<const nn::TransformerVariantConfig&>(c), opts);
  return std::make_shared<nn::TransformerEncoderImpl>(
      opts, nn::registry_scorer_factory(options, ctx, nn::AttentionRoles::Self, nn::kTransformerScorer));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Encoder, "transformer",
               "Transformer encoder (d2l 11.7): embedding, positional encoding, self-attention blocks", schema, make)
