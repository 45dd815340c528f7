// Model plugin "seq2seq_regression": Step-by-Step ch. 10's EncoderDecoderTransf on continuous
// features. One linear projection n_features -> d_model feeds both stacks (x * sqrt(d_model) +
// positional encoding), the framework's transformer encoder/decoder stacks (norm first or last,
// any scorer) run on the projected sequences, and a linear layer maps back to n_features.
#include <attnlab/error.hpp>
#include <attnlab/nn/regression.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/nn/transformer_options.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/modules/linear.h>

#include <cmath>

namespace {
using namespace attnlab;

class Seq2SeqRegression final : public nn::SequenceRegressor {
 public:
  Seq2SeqRegression(const nn::TransformerOptions& opts, const nn::ScorerFactory& make_scorer, int64_t n_features,
                    double pe_dropout, bool xavier)
      : n_features_(n_features), scale_(std::sqrt(static_cast<double>(opts.num_hiddens()))) {
    proj = register_module("proj", torch::nn::Linear(n_features, opts.num_hiddens()));
    pos_encoding = register_module("pos_encoding", nn::PositionalEncoding(opts.num_hiddens(), pe_dropout,
                                                                          opts.max_len(), opts.positional_encoding()));
    encoder = register_module("encoder", nn::TransformerEncoder(opts, make_scorer));
    decoder = register_module("decoder", nn::TransformerDecoder(opts, make_scorer));
    linear = register_module("linear", torch::nn::Linear(opts.num_hiddens(), n_features));
    // positional_encoding auto: the stacks have resolved it by their self-attention scorers; the
    // shared encoding is off when neither stack wants it.
    if (opts.positional_encoding() == nn::AbsolutePositions::Auto &&
        encoder->pos_encoding->kind() == nn::AbsolutePositions::None &&
        decoder->pos_encoding->kind() == nn::AbsolutePositions::None) {
      pos_encoding->switch_off();
    }
    // The stacks' token embeddings, their own positional encodings and the decoder's vocabulary
    // layer are not used on continuous inputs: drop them so they are neither trained nor counted.
    for (const char* name : {"embedding", "pos_encoding"}) {
      encoder->unregister_module(name);
      decoder->unregister_module(name);
    }
    decoder->unregister_module("dense");
    encoder->embedding = nullptr;
    encoder->pos_encoding = nullptr;
    decoder->embedding = nullptr;
    decoder->pos_encoding = nullptr;
    decoder->dense = nullptr;
    if (xavier) nn::xavier_uniform_init(*this);
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override {
    check_input("src", src);
    check_input("tgt_in", tgt_in);
    return decode(encode(src), tgt_in);  // [B, T, F]
  }

  torch::Tensor predict(const torch::Tensor& src, int64_t steps) override {
    check_input("src", src);
    TORCH_CHECK(steps >= 1, "seq2seq_regression: predict needs steps >= 1, found ", steps);
    auto states = encode(src);                        // [B, S, H]
    auto inputs = src.narrow(1, src.size(1) - 1, 1);  // [B, 1, F] the last source point
    for (int64_t i = 0; i < steps; ++i) {
      auto out = decode(states, inputs);                               // [B, i + 1, F]
      inputs = torch::cat({inputs, out.narrow(1, i, 1)}, 1).detach();  // [B, i + 2, F]
    }
    return inputs.narrow(1, 1, steps);  // [B, steps, F]
  }

  int64_t num_features() const override { return n_features_; }

  torch::nn::Linear proj{nullptr}, linear{nullptr};
  nn::PositionalEncoding pos_encoding{nullptr};
  nn::TransformerEncoder encoder{nullptr};
  nn::TransformerDecoder decoder{nullptr};

 private:
  void check_input(const char* what, const torch::Tensor& x) const {
    TORCH_CHECK(x.dim() == 3 && x.size(2) == n_features_ && x.size(1) >= 1, "seq2seq_regression: expected ", what,
                " [B, T, ", n_features_, "], found ", x.sizes());
  }

  /// x [B, T, F] -> proj(x) * sqrt(d_model) + P[:T] -> [B, T, H]
  torch::Tensor embed(const torch::Tensor& x) { return pos_encoding->forward(proj->forward(x) * scale_); }

  torch::Tensor encode(const torch::Tensor& src) { return encoder->forward_embedded(embed(src), {}); }  // [B, S, H]

  /// states [B, S, H], tgt_in [B, T, F] -> [B, T, F] (full causal pass over tgt_in)
  torch::Tensor decode(const torch::Tensor& states, const torch::Tensor& tgt_in) {
    nn::EncoderOutput enc;
    enc.states = states;  // no source padding: every source has all its points
    auto state = decoder->init_state(enc, /*incremental=*/false);
    auto& st = static_cast<nn::TransformerDecoderState&>(*state);  // made by TransformerDecoderImpl
    return linear->forward(decoder->forward_embedded(embed(tgt_in), st));
  }

  int64_t n_features_;
  double scale_;
};

struct Config : nn::TransformerConfig {
  bool xavier_init = true;  // init: xavier_uniform | default
  double pe_dropout = 0.0;
};

const config::Binding<Config>& binding() {
  // Step-by-Step's model as the defaults: d_model 6, 3 heads, FFN 10, 2 + 2 layers, dropout 0.1,
  // biased projections, norm first, dropout inside the FFN, positions up to 100.
  static const auto b =
      config::Binding<Config>()
          .include(nn::transformer_binding(nn::AttentionRoles::SelfAndCross, {.num_hiddens = 6,
                                                                              .ffn_num_hiddens = 10,
                                                                              .num_heads = 3,
                                                                              .num_blks = 2,
                                                                              .dropout = 0.1,
                                                                              .bias = true,
                                                                              .norm = nn::NormPlacement::First,
                                                                              .max_len = 100,
                                                                              .ffn_dropout = 0.1}))
          .choice("init", &Config::xavier_init, {{"xavier_uniform", true}, {"default", false}},
                  "xavier_uniform: Xavier-uniform for every parameter with dim > 1 (the book), but a scorer's own "
                  "tables (t5_bias, shaw) and a learned positional table keep their start; default: LibTorch's "
                  "own initialisation")
          .option("pe_dropout", &Config::pe_dropout, "dropout after the positional encoding (the book has none)",
                  {.min = 0.0, .max = 1.0});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Model> make(const config::Options& o, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.num_features > 0, ConfigError,
                "{}: {} regresses continuous features, but the dataset reports num_features {} "
                "(use a dataset of feature sequences, e.g. corners)",
                o.resolved().where(), o.owner(), ctx.data.num_features);
  const Config c = binding().read(o);
  auto opts = nn::transformer_options(o, c, /*vocab_size=*/1);  // no vocabulary: the token layers are dropped
  auto scorers = nn::registry_scorer_factory(o, ctx, nn::AttentionRoles::SelfAndCross, nn::kTransformerScorer);
  return std::make_shared<Seq2SeqRegression>(opts, scorers, ctx.data.num_features, c.pe_dropout, c.xavier_init);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Model, "seq2seq_regression",
               "Step-by-Step ch. 10 transformer on continuous sequences: projection, transformer stacks (norm "
               "first/last), linear out, autoregressive predict",
               schema, make)
