// Decoder plugin "transformer": d2l 1.0.3's TransformerDecoder with any scorer and norm placement.
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>

namespace {

using namespace attnlab;

struct Config : nn::TransformerConfig, nn::TransformerDecoderVariantConfig {};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>()
                            .include(nn::transformer_binding(nn::AttentionRoles::SelfAndCross))
                            .include(nn::transformer_decoder_variant_binding());
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Decoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.tgt_vocab_size > 0, ConfigError,
                "{}: {} predicts target tokens, but the dataset reports no target vocabulary (tgt_vocab_size {})",
                options.resolved().where(), options.owner(), ctx.data.tgt_vocab_size);
  const Config c = binding().read(options);
  auto opts = nn::transformer_options(options, c, ctx.data.tgt_vocab_size);
  // Positions past max_len have no encoding: the dataset's padded length must fit, before training.
  if (ctx.data.num_steps > c.max_len) {
    nn::transformer_binding(nn::AttentionRoles::Self)
        .fail(options, &nn::TransformerConfig::max_len,
              fmt::format("max_len {} is shorter than the dataset's sequences ({} steps, dataset.num_steps)",
                          c.max_len, ctx.data.num_steps));
  }
  nn::apply_variant_options(static_cast<const nn::TransformerDecoderVariantConfig&>(c), opts);
  return std::make_shared<nn::TransformerDecoderImpl>(
      opts, nn::registry_scorer_factory(options, ctx, nn::AttentionRoles::SelfAndCross, nn::kTransformerScorer));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Decoder, "transformer",
               "Transformer decoder (d2l 11.7): causal self-attention, cross-attention, cached incremental steps",
               schema, make)
