// Decoder plugin "gru": d2l 0.17's Seq2SeqDecoder, the no-attention baseline. Every step sees the
// encoder's final last-layer state as its context.
#include "gru_decoder.hpp"

#include <attnlab/error.hpp>
#include <attnlab/nn/rnn_options.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

const config::Binding<nn::GruConfig>& binding() {
  static const auto b = nn::gru_binding(/*with_attention=*/false);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Decoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.tgt_vocab_size > 0, ConfigError,
                "{}: {} predicts target tokens, but the dataset reports no target vocabulary (tgt_vocab_size {})",
                options.resolved().where(), options.owner(), ctx.data.tgt_vocab_size);
  return std::make_shared<decoders::gru::GruDecoderImpl>(
      nn::gru_options(binding().read(options), ctx.data.tgt_vocab_size));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Decoder, "gru",
               "GRU decoder without attention (d2l 0.17 Seq2SeqDecoder): context = encoder's final state", schema, make)
