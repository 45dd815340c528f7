// Decoder plugin "gru_bahdanau": d2l 0.17's Seq2SeqAttentionDecoder. The query is the last layer's
// previous hidden state, keys/values the encoder states; any scorer (default additive).
#include "gru_bahdanau_decoder.hpp"

#include <attnlab/error.hpp>
#include <attnlab/nn/rnn_options.hpp>
#include <attnlab/nn/scorer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

const config::Binding<nn::GruConfig>& binding() {
  static const auto b = nn::gru_binding(/*with_attention=*/true);
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Decoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.tgt_vocab_size > 0, ConfigError,
                "{}: {} predicts target tokens, but the dataset reports no target vocabulary (tgt_vocab_size {})",
                options.resolved().where(), options.owner(), ctx.data.tgt_vocab_size);
  auto opts = nn::gru_options(binding().read(options), ctx.data.tgt_vocab_size);
  // Queries (decoder hidden state) and keys (encoder states) both have num_hiddens features.
  nn::ScorerContext cross;
  cross.query_size = cross.key_size = opts.num_hiddens();
  cross.role = nn::ScorerContext::Role::Cross;
  auto scorer = nn::registry_scorer_factory(options, ctx, nn::AttentionRoles::Cross, nn::kGruScorer)(cross);
  return std::make_shared<decoders::gru_bahdanau::GruBahdanauDecoderImpl>(opts, std::move(scorer));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Decoder, "gru_bahdanau",
               "GRU decoder with Bahdanau attention (d2l 0.17 Seq2SeqAttentionDecoder); records decoder_cross", schema,
               make)
