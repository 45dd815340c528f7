// Encoder plugin "gru": d2l 0.17's Seq2SeqEncoder (embedding, multi-layer GRU, dropout between layers).
#include "gru_encoder.hpp"

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

std::shared_ptr<nn::Encoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.src_vocab_size > 0, ConfigError,
                "{}: {} embeds source token ids, but the dataset reports no source vocabulary (src_vocab_size {})",
                options.resolved().where(), options.owner(), ctx.data.src_vocab_size);
  return std::make_shared<encoders::gru::GruEncoderImpl>(
      nn::gru_options(binding().read(options), ctx.data.src_vocab_size));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Encoder, "gru",
               "GRU encoder (d2l 0.17 Seq2SeqEncoder): embedding, multi-layer GRU; returns states and final state",
               schema, make)
