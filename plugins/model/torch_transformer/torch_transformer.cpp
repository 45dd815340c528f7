// Model plugin "torch_transformer": LibTorch's own torch::nn::Transformer (norm-last, final
// LayerNorm on each stack) behind nn::SequenceRegressor, as Step-by-Step ch. 10's "PyTorch
// Transformer" section uses it: projection n_features -> d_model, x * sqrt(d_model) + positional
// encoding, a LayerNorm, the Transformer (sequence-first inside), linear back to n_features.
//
// LibTorch's layers do not return attention weights; while a recorder is active (evaluation
// only), the forward walks the layers itself, asks each attention module for its per-head weights
// on the same inputs the layer sees, and records them as the framework's stacks do.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/layers.hpp>
#include <attnlab/nn/regression.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/torch.h>

#include <cmath>

namespace {
using namespace attnlab;
namespace tnn = torch::nn;

class TorchTransformer final : public nn::SequenceRegressor {
 public:
  TorchTransformer(int64_t n_features, int64_t d_model, int64_t heads, int64_t ffn, int64_t blocks, double dropout,
                   int64_t max_len, bool xavier)
      : n_features_(n_features), scale_(std::sqrt(static_cast<double>(d_model))) {
    transformer = register_module("transf", tnn::Transformer(tnn::TransformerOptions(d_model, heads)
                                                                 .num_encoder_layers(blocks)
                                                                 .num_decoder_layers(blocks)
                                                                 .dim_feedforward(ffn)
                                                                 .dropout(dropout)));
    proj = register_module("proj", tnn::Linear(n_features, d_model));
    linear = register_module("linear", tnn::Linear(d_model, n_features));
    pos_encoding = register_module("pe", nn::PositionalEncoding(d_model, 0.0, max_len));
    norm = register_module("norm", tnn::LayerNorm(tnn::LayerNormOptions({d_model})));
    if (xavier) nn::xavier_uniform_init(*this);
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override {
    check_input("src", src);
    check_input("tgt_in", tgt_in);
    return encode_decode(src, tgt_in);  // [B, T, F]
  }

  torch::Tensor predict(const torch::Tensor& src, int64_t steps) override {
    check_input("src", src);
    TORCH_CHECK(steps >= 1, "torch_transformer: predict needs steps >= 1, found ", steps);
    auto inputs = src.narrow(1, src.size(1) - 1, 1);  // [B, 1, F]
    for (int64_t i = 0; i < steps; ++i) {
      auto out = encode_decode(src, inputs);                           // [B, i + 1, F]
      inputs = torch::cat({inputs, out.narrow(1, i, 1)}, 1).detach();  // [B, i + 2, F]
    }
    return inputs.narrow(1, 1, steps);  // [B, steps, F]
  }

  int64_t num_features() const override { return n_features_; }

  tnn::Transformer transformer{nullptr};
  tnn::Linear proj{nullptr}, linear{nullptr};
  nn::PositionalEncoding pos_encoding{nullptr};
  tnn::LayerNorm norm{nullptr};

 private:
  void check_input(const char* what, const torch::Tensor& x) const {
    TORCH_CHECK(x.dim() == 3 && x.size(2) == n_features_ && x.size(1) >= 1, "torch_transformer: expected ", what,
                " [B, T, ", n_features_, "], found ", x.sizes());
  }

  /// The book's preprocess: x [B, T, F] -> norm(proj(x) * sqrt(d) + P[:T]), sequence-first [T, B, H]
  torch::Tensor preprocess(const torch::Tensor& x) {
    return norm->forward(pos_encoding->forward(proj->forward(x) * scale_)).transpose(0, 1);
  }

  /// src [B, S, F], tgt [B, T, F] -> [B, T, F]
  torch::Tensor encode_decode(const torch::Tensor& src, const torch::Tensor& tgt) {
    auto s = preprocess(src), t = preprocess(tgt);  // [S, B, H], [T, B, H]
    auto mask = tnn::TransformerImpl::generate_square_subsequent_mask(t.size(0)).to(t.device());  // [T, T]
    auto* recorder = nn::active_recorder();
    auto out = recorder ? recorded_pass(*recorder, s, t, mask) : transformer->forward(s, t, {}, mask);  // [T, B, H]
    return linear->forward(out.transpose(0, 1));                                                        // [B, T, F]
  }

  /// The same computation as Transformer::forward, layer by layer, recording the per-head weights
  /// [B, heads, Q, K] of every attention module.
  torch::Tensor recorded_pass(nn::AttentionRecorder& recorder, const torch::Tensor& src, const torch::Tensor& tgt,
                              const torch::Tensor& tgt_mask) {
    using nn::Side;
    auto encoder = transformer->encoder.ptr<tnn::TransformerEncoderImpl>();
    auto decoder = transformer->decoder.ptr<tnn::TransformerDecoderImpl>();
    auto memory = src;  // [S, B, H]
    for (size_t i = 0; i < encoder->layers->size(); ++i) {
      auto& layer = encoder->layers->at<tnn::TransformerEncoderLayerImpl>(i);
      auto self_w =
          std::get<1>(layer.self_attn->forward(memory, memory, memory, {}, true, {}, false));  // [B, heads, S, S]
      recorder.record({nn::kEncoderSelf, static_cast<int64_t>(i), Side::Source, Side::Source}, self_w);
      memory = layer.forward(memory);
    }
    if (!encoder->norm.is_empty()) memory = encoder->norm.forward<torch::Tensor>(memory);
    auto out = tgt;  // [T, B, H]
    for (size_t i = 0; i < decoder->layers->size(); ++i) {
      auto& layer = decoder->layers->at<tnn::TransformerDecoderLayerImpl>(i);
      const auto l = static_cast<int64_t>(i);
      auto [self_out, self_w] = layer.self_attn->forward(out, out, out, {}, true, tgt_mask, false);
      recorder.record({nn::kDecoderSelf, l, Side::Target, Side::Target}, self_w);  // [B, heads, T, T]
      auto query = layer.norm1->forward(out + layer.dropout1->forward(self_out));  // what cross-attention sees
      auto cross_w = std::get<1>(layer.multihead_attn->forward(query, memory, memory, {}, true, {}, false));
      recorder.record({nn::kDecoderCross, l, Side::Target, Side::Source}, cross_w);  // [B, heads, T, S]
      out = layer.forward(out, memory, tgt_mask);
    }
    if (!decoder->norm.is_empty()) out = decoder->norm.forward<torch::Tensor>(out);
    return out;
  }

  int64_t n_features_;
  double scale_;
};

struct Config {
  int64_t num_hiddens = 6;
  int64_t num_heads = 3;
  int64_t ffn_num_hiddens = 20;
  int64_t num_blks = 1;
  double dropout = 0.1;
  int64_t max_len = 100;
  bool xavier_init = true;  // init: xavier_uniform | default
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("num_hiddens", &Config::num_hiddens, "d_model", {.min = 1, .max = 65536})
          .option("num_heads", &Config::num_heads, "attention heads; must divide num_hiddens", {.min = 1, .max = 1024})
          .option("ffn_num_hiddens", &Config::ffn_num_hiddens, "dim_feedforward", {.min = 1, .max = 1 << 20})
          .option("num_blks", &Config::num_blks, "encoder layers and decoder layers (each)", {.min = 1, .max = 1000})
          .option("dropout", &Config::dropout, "dropout of every LibTorch transformer layer", {.min = 0.0, .max = 1.0})
          .option("max_len", &Config::max_len, "longest sequence the positional encoding covers",
                  {.min = 1, .max = 1000000})
          .choice("init", &Config::xavier_init, {{"xavier_uniform", true}, {"default", false}},
                  "xavier_uniform: Xavier-uniform for every parameter with dim > 1 (the book); default: LibTorch's");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Model> make(const config::Options& o, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.num_features > 0, ConfigError,
                "{}: {} regresses continuous features, but the dataset reports num_features {}", o.resolved().where(),
                o.owner(), ctx.data.num_features);
  const Config c = binding().read(o);
  if (c.num_hiddens % c.num_heads != 0) {
    binding().fail(o, &Config::num_heads,
                   fmt::format("{} heads do not divide num_hiddens {}", c.num_heads, c.num_hiddens));
  }
  return std::make_shared<TorchTransformer>(ctx.data.num_features, c.num_hiddens, c.num_heads, c.ffn_num_hiddens,
                                            c.num_blks, c.dropout, c.max_len, c.xavier_init);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Model, "torch_transformer",
               "LibTorch's torch::nn::Transformer (norm-last) on continuous sequences, Step-by-Step ch. 10's "
               "reference model",
               schema, make)
