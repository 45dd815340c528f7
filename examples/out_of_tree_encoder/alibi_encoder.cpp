// Encoder plugin "alibi_transformer": a Transformer encoder whose only notion of order is ALiBi
// (Press, Smith and Lewis, "Train Short, Test Long", ICLR 2022). No positional encoding is added to
// the embeddings; instead every self-attention score gets a bias that falls linearly with the
// distance between query and key, with one slope per head:
//
//   score_h(i, j) = q_i . k_j / sqrt(d) - m_h |i - j|,   m_h = 2^(-8h / n),  h = 1..n heads
//
// (|i - j|: an encoder sees keys on both sides of the query.) Built outside the attnlab tree
// against the installed SDK, from its shared blocks: MultiHeadAttention (which folds the heads into
// the batch and calls a Scorer), AddNorm and PositionWiseFFN (attnlab/nn/layers.hpp).
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/layers.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <vector>

namespace {
using namespace attnlab;

/// Scaled dot product plus ALiBi's distance bias. MultiHeadAttention hands it [B * heads, T, d]
/// with row r holding head r % heads (docs/PLUGINS.md), so the bias is laid out the same way.
class LinearBiasScorer final : public nn::Scorer {
 public:
  explicit LinearBiasScorer(int64_t num_heads) {
    std::vector<float> m;
    for (int64_t h = 1; h <= num_heads; ++h) m.push_back(std::exp2(-8.0f * h / static_cast<float>(num_heads)));
    slopes_ = register_buffer("slopes", torch::tensor(m));  // [heads]
  }

  /// queries [B * heads, Q, d], keys [B * heads, K, d] -> [B * heads, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions& at) override {
    const int64_t heads = slopes_.size(0), q = queries.size(1), k = keys.size(1);
    auto dots = torch::bmm(queries, keys.transpose(1, 2)) / std::sqrt(static_cast<double>(queries.size(2)));
    auto i = torch::arange(at.query_offset, at.query_offset + q, slopes_.options()).view({q, 1});
    auto j = torch::arange(at.key_offset, at.key_offset + k, slopes_.options()).view({1, k});
    auto bias = -slopes_.view({heads, 1, 1}) * (i - j).abs();  // [heads, Q, K]
    return (dots.view({-1, heads, q, k}) + bias.to(dots.scalar_type())).view({-1, q, k});
  }

 private:
  torch::Tensor slopes_;
};

/// Its options (all but vocab_size, the dataset's, bound to the config in binding() below).
struct Options {
  int64_t vocab_size = 0;
  int64_t num_hiddens = 256;
  int64_t ffn_num_hiddens = 64;
  int64_t num_heads = 4;
  int64_t num_blks = 2;
  double dropout = 0.2;
  nn::NormPlacement norm = nn::NormPlacement::Last;
};

/// Self-attention with ALiBi + add & norm, FFN + add & norm (d2l's block, norm first or last).
/// While a recorder is active, its attention records as layer `index` of "encoder_self" (source
/// tokens on both axes), which the runner writes to the results file and `runner plot` draws.
class Block : public torch::nn::Module {
 public:
  Block(const Options& o, int64_t index) {
    const nn::RecordAs self{nn::kEncoderSelf, index, nn::Side::Source, nn::Side::Source};
    attention = register_module(
        "attention", nn::MultiHeadAttention(
                         nn::MultiHeadAttentionOptions(o.num_hiddens, o.num_heads).dropout(o.dropout).record_as(self),
                         std::make_shared<LinearBiasScorer>(o.num_heads)));
    addnorm1 = register_module("addnorm1", nn::AddNorm(o.num_hiddens, o.dropout, o.norm));
    ffn = register_module("ffn", nn::PositionWiseFFN(o.num_hiddens, o.ffn_num_hiddens, o.num_hiddens));
    addnorm2 = register_module("addnorm2", nn::AddNorm(o.num_hiddens, o.dropout, o.norm));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& valid_lens) {
    auto a = addnorm1->pre(x);
    auto y = addnorm1->post(x, attention->forward(a, a, a, valid_lens));
    return addnorm2->post(y, ffn->forward(addnorm2->pre(y)));
  }

  nn::MultiHeadAttention attention{nullptr};
  nn::AddNorm addnorm1{nullptr}, addnorm2{nullptr};
  nn::PositionWiseFFN ffn{nullptr};
};

class AlibiEncoder final : public nn::Encoder {
 public:
  explicit AlibiEncoder(const Options& o) : options_(o) {
    embedding_ = register_module("embedding", torch::nn::Embedding(o.vocab_size, o.num_hiddens));
    dropout_ = register_module("dropout", torch::nn::Dropout(o.dropout));
    auto blks = register_module("blks", torch::nn::ModuleList());
    for (int64_t b = 0; b < o.num_blks; ++b) {
      blocks_.push_back(std::make_shared<Block>(o, b));
      blks->push_back(blocks_.back());
    }
    if (o.norm == nn::NormPlacement::First) {
      final_ln_ = register_module("final_ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.num_hiddens})));
    }
  }

  /// src [B, S] ids, valid_lens [B] -> states [B, S, H]
  nn::EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& valid_lens) override {
    // Scaled like d2l's embedding, but nothing is added: order reaches the model through ALiBi alone.
    auto x = dropout_->forward(embedding_->forward(src) * std::sqrt(static_cast<double>(options_.num_hiddens)));
    for (auto& block : blocks_) x = block->forward(x, valid_lens);
    if (final_ln_) x = final_ln_->forward(x);
    return {x, valid_lens};
  }

  int64_t output_size() const override { return options_.num_hiddens; }

 private:
  Options options_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm final_ln_{nullptr};
};

const config::Binding<Options>& binding() {
  static const auto b =
      config::Binding<Options>()
          .option("num_hiddens", &Options::num_hiddens, "model width H", {.min = 1, .max = 65536})
          .option("ffn_num_hiddens", &Options::ffn_num_hiddens, "inner width of the position-wise FFN",
                  {.min = 1, .max = 1 << 20})
          .option("num_heads", &Options::num_heads,
                  "attention heads: a power of two (ALiBi's geometric slopes) dividing num_hiddens",
                  {.min = 1, .max = 1024})
          .option("num_blks", &Options::num_blks, "number of blocks", {.min = 1, .max = 1000})
          .option("dropout", &Options::dropout, "dropout on embeddings, attention weights and residual branches",
                  {.min = 0.0, .max = 1.0})
          .choice("norm", &Options::norm, {{"first", nn::NormPlacement::First}, {"last", nn::NormPlacement::Last}},
                  "layer norm placement (first adds a final LayerNorm)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Encoder> make(const config::Options& options, const plugin::BuildContext& ctx) {
  ATTNLAB_CHECK(ctx.data.src_vocab_size > 0, ConfigError,
                "{}: {} embeds token ids, but the dataset has no source vocabulary", options.resolved().where(),
                options.owner());
  Options o = binding().read(options);
  o.vocab_size = ctx.data.src_vocab_size;
  if ((o.num_heads & (o.num_heads - 1)) != 0) {
    binding().fail(options, &Options::num_heads,
                   fmt::format("ALiBi's slopes 2^(-8h/n) are defined here for a power of two, found {}", o.num_heads));
  }
  if (o.num_hiddens % o.num_heads != 0) {
    binding().fail(options, &Options::num_heads,
                   fmt::format("{} heads do not divide num_hiddens {}", o.num_heads, o.num_hiddens));
  }
  return std::make_shared<AlibiEncoder>(o);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Encoder, "alibi_transformer",
               "Transformer encoder with ALiBi self-attention and no positional encoding", schema, make)
