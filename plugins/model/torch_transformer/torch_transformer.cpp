// Model plugin "torch_transformer": LibTorch's own torch::nn::Transformer (norm-last, final
// LayerNorm on each stack) behind nn::SequenceRegressor, as Step-by-Step ch. 10's "PyTorch
// Transformer" section uses it: projection n_features -> d_model, x * sqrt(d_model) + positional
// encoding, a LayerNorm, the Transformer (sequence-first inside), linear back to n_features.
//
// LibTorch's layers neither return per-head outputs nor take a head mask. So while a recorder or
// a head mask (interventions.head_mask, issue 40) is active, the forward walks the layers itself:
// the same computation as LibTorch's post-norm layers, with each multi-head attention taken apart
// (its in_proj and out_proj weights) and its attention pooling done by one of the framework's
// Attention modules per layer and module (`sites`, no parameters of their own). Those record the
// per-head weights and apply the head mask as in the framework's stacks, and make the layers
// sites that attention_sites() finds. Otherwise LibTorch's own forward runs, untouched.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/nn/layers.hpp>
#include <attnlab/nn/regression.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/transformer.h>
#include <torch/nn/modules/transformercoder.h>
#include <torch/nn/functional.h>

#include <cmath>
#include <vector>

namespace {
using namespace attnlab;
namespace tnn = torch::nn;

class TorchTransformer final : public nn::SequenceRegressor {
 public:
  TorchTransformer(int64_t n_features, int64_t d_model, int64_t heads, int64_t ffn, int64_t blocks, double dropout,
                   int64_t max_len, bool xavier)
      : n_features_(n_features), heads_(heads), scale_(std::sqrt(static_cast<double>(d_model))) {
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
    // After the init: the sites have no parameters, and the checkpoint's names stay LibTorch's.
    auto site = [&](const char* module, int64_t layer, nn::Side queries, nn::Side keys) {
      return register_module(fmt::format("site_{}_{}", module, layer),
                             nn::Attention(std::make_shared<nn::DotProductScorerImpl>(), dropout,
                                           nn::RecordAs{module, layer, queries, keys}, heads));
    };
    for (int64_t i = 0; i < blocks; ++i) {
      encoder_self_.push_back(site(nn::kEncoderSelf, i, nn::Side::Source, nn::Side::Source));
      decoder_self_.push_back(site(nn::kDecoderSelf, i, nn::Side::Target, nn::Side::Target));
      decoder_cross_.push_back(site(nn::kDecoderCross, i, nn::Side::Target, nn::Side::Source));
    }
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
    const auto* mask = nn::active_head_mask();
    const bool walk = nn::active_recorder() != nullptr || (mask != nullptr && !mask->empty());
    torch::Tensor out;  // [T, B, H]
    if (walk) {
      out = walked_pass(s, t);
    } else {
      auto causal = tnn::TransformerImpl::generate_square_subsequent_mask(t.size(0)).to(t.device());  // [T, T]
      out = transformer->forward(s, t, {}, causal);
    }
    return linear->forward(out.transpose(0, 1));  // [B, T, F]
  }

  /// LibTorch's MultiheadAttention (one in_proj for q, k, v; batch second), with the pooling done
  /// by `pool`: q_in [Q, B, H], kv_in [K, B, H], valid_lens [B * heads, Q] or undefined -> [Q, B, H]
  torch::Tensor attend(tnn::MultiheadAttentionImpl& m, nn::Attention& pool, const torch::Tensor& q_in,
                       const torch::Tensor& kv_in, const torch::Tensor& valid_lens) const {
    namespace F = torch::nn::functional;
    const int64_t Q = q_in.size(0), K = kv_in.size(0), B = q_in.size(1), H = q_in.size(2);
    TORCH_CHECK(m.in_proj_weight.defined() && m.in_proj_bias.defined(),
                "torch_transformer: expected a MultiheadAttention with one in_proj and biases");
    const auto w = m.in_proj_weight.chunk(3, 0), b = m.in_proj_bias.chunk(3, 0);
    auto heads_first = [&](const torch::Tensor& x, int64_t L) {  // [L, B, H] -> [B * heads, L, H / heads]
      return x.reshape({L, B * heads_, H / heads_}).transpose(0, 1);
    };
    auto q = heads_first(F::linear(q_in, w[0], b[0]), Q);
    auto k = heads_first(F::linear(kv_in, w[1], b[1]), K);
    auto v = heads_first(F::linear(kv_in, w[2], b[2]), K);
    auto o = pool->forward(q, k, v, valid_lens);  // [B * heads, Q, H / heads], head h scaled by the mask
    return m.out_proj->forward(o.transpose(0, 1).reshape({Q, B, H}));
  }

  /// The same computation as Transformer::forward (post-norm layers, ReLU, final LayerNorms),
  /// layer by layer, with the attention pooling in the sites: recorded and masked as the
  /// framework's stacks are. src [S, B, H], tgt [T, B, H] -> [T, B, H]
  torch::Tensor walked_pass(const torch::Tensor& src, const torch::Tensor& tgt) {
    namespace F = torch::nn::functional;
    auto encoder = transformer->encoder.ptr<tnn::TransformerEncoderImpl>();
    auto decoder = transformer->decoder.ptr<tnn::TransformerDecoderImpl>();
    auto memory = src;  // [S, B, H]
    for (size_t i = 0; i < encoder->layers->size(); ++i) {
      auto& layer = encoder->layers->at<tnn::TransformerEncoderLayerImpl>(i);
      auto a = attend(*layer.self_attn, encoder_self_[i], memory, memory, {});
      memory = layer.norm1(memory + layer.dropout1(a));
      auto f = layer.linear2(layer.dropout(F::relu(layer.linear1(memory))));
      memory = layer.norm2(memory + layer.dropout2(f));
    }
    if (!encoder->norm.is_empty()) memory = encoder->norm.forward<torch::Tensor>(memory);
    const int64_t T = tgt.size(0), B = tgt.size(1);
    // Causal: query t sees keys 0..t, for every (sequence, head) row.
    auto causal = torch::arange(1, T + 1, torch::TensorOptions(torch::kLong).device(tgt.device()))
                      .unsqueeze(0)
                      .expand({B * heads_, T});  // [B * heads, T]
    auto out = tgt;  // [T, B, H]
    for (size_t i = 0; i < decoder->layers->size(); ++i) {
      auto& layer = decoder->layers->at<tnn::TransformerDecoderLayerImpl>(i);
      out = layer.norm1(out + layer.dropout1(attend(*layer.self_attn, decoder_self_[i], out, out, causal)));
      out = layer.norm2(out + layer.dropout2(attend(*layer.multihead_attn, decoder_cross_[i], out, memory, {})));
      auto f = layer.linear2(layer.dropout(F::relu(layer.linear1(out))));
      out = layer.norm3(out + layer.dropout3(f));
    }
    if (!decoder->norm.is_empty()) out = decoder->norm.forward<torch::Tensor>(out);
    return out;
  }

  int64_t n_features_;
  int64_t heads_;
  double scale_;
  std::vector<nn::Attention> encoder_self_, decoder_self_, decoder_cross_;  // the sites, one per layer
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
