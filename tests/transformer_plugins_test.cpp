// The dot_product scorer and transformer encoder/decoder plugins, created through the registry
// from config nodes: happy path, option validation and error messages, a scorer per attention
// role, and errors from their forward() naming the plugin.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/registry.hpp>

#include "testing/plugins.hpp"
#include "testing/position_scorers.hpp"
#include "testing/testing.hpp"

#include <functional>
#include <string>

namespace {

using namespace attnlab;
using testutil::message_of;
using Sizes = std::vector<int64_t>;

class TransformerPlugins : public testutil::RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    ctx.data.src_vocab_size = 20;
    ctx.data.tgt_vocab_size = 21;
  }
  config::Node yaml(const std::string& text) { return config::parse_yaml(text, "test.yaml").at("model"); }
};

TEST_F(TransformerPlugins, BuildsATrainableModel) {
  auto node = yaml(
      "model: {plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 2,\n"
      "        dropout: 0.0, norm: first, attention: {scorer: {plugin: dot_product}}}");
  auto encoder = registry.create<nn::Encoder>(node, ctx);
  auto decoder = registry.create<nn::Decoder>(node, ctx);
  auto* enc = dynamic_cast<nn::TransformerEncoderImpl*>(encoder.get());
  ASSERT_NE(enc, nullptr);
  EXPECT_EQ(enc->options.num_hiddens(), 16);
  EXPECT_EQ(enc->options.vocab_size(), 20);
  EXPECT_EQ(enc->blocks.size(), 2u);
  EXPECT_TRUE(enc->final_ln);  // norm: first
  EXPECT_EQ(encoder->output_size(), 16);
  nn::EncoderDecoder model(encoder, decoder);
  auto logits = model->forward(torch::randint(0, 20, {2, 5}), torch::tensor({5, 3}), torch::randint(0, 21, {2, 4}));
  EXPECT_EQ(logits.sizes(), (Sizes{2, 4, 21}));
  logits.sum().backward();
  for (const auto& p : model->parameters()) EXPECT_TRUE(p.grad().defined());
}

// `positional_encoding: none` adds nothing to the embeddings (ALiBi gives positions through the
// scorer): a sequence of one repeated token then has the same state at every position, in the
// encoder and in the decoder; with d2l's sinusoidal encoding the positions differ.
TEST_F(TransformerPlugins, PositionalEncodingNoneLeavesPositionsIndistinguishable) {
  const std::string model = "model: {plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, "
                            "num_blks: 2, dropout: 0.0, positional_encoding: ";
  const auto src = torch::full({1, 6}, 3, torch::kLong), tgt = torch::full({1, 5}, 4, torch::kLong);
  const auto spread = [](const torch::Tensor& x) {  // x [1, T, H]: largest distance from position 0
    return (x - x.narrow(1, 0, 1)).abs().max().item<double>();
  };
  for (const bool none : {true, false}) {
    auto node = yaml(model + (none ? "none}" : "sinusoidal}"));
    auto encoder = registry.create<nn::Encoder>(node, ctx);
    auto decoder = registry.create<nn::Decoder>(node, ctx);
    encoder->eval();
    decoder->eval();
    torch::NoGradGuard no_grad;
    auto enc = encoder->forward(src, torch::tensor({6}));
    auto state = decoder->init_state(enc, /*incremental=*/false);
    // Causal self-attention over identical inputs still averages identical values.
    auto logits = decoder->forward(tgt, *state);  // [1, 5, 21]
    if (none) {
      EXPECT_LT(spread(enc.states), 1e-5);
      EXPECT_LT(spread(logits), 1e-5);
    } else {
      EXPECT_GT(spread(enc.states), 1e-2);
      EXPECT_GT(spread(logits), 1e-2);
    }
  }
  auto msg = message_of<ConfigError>(
      [&] { registry.create<nn::Encoder>(yaml("model: {plugin: transformer, positional_encoding: rotary}"), ctx); });
  EXPECT_TRUE(testutil::contains(msg, "positional_encoding") && testutil::contains(msg, "learned")) << msg;
}

// `positional_encoding: learned` adds a trained table [max_len, H] (BERT, GPT-2): it separates the
// positions of a repeated token, is trained (its rows for the positions seen get gradients, the
// rest none), is saved under pos_encoding.table, and step-by-step decoding reads row t at step t.
TEST_F(TransformerPlugins, LearnedPositionsAreATrainedTable) {
  const std::string model = "model: {plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, "
                            "num_blks: 2, dropout: 0.0, max_len: 40, positional_encoding: learned}";
  auto encoder = registry.create<nn::Encoder>(yaml(model), ctx);
  auto decoder = registry.create<nn::Decoder>(yaml(model), ctx);
  auto* enc = dynamic_cast<nn::TransformerEncoderImpl*>(encoder.get());
  auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  ASSERT_TRUE(enc && dec);
  for (const auto* pe : {enc->pos_encoding.get(), dec->pos_encoding.get()}) {
    EXPECT_EQ(pe->kind(), nn::AbsolutePositions::Learned);
    EXPECT_EQ(pe->table.sizes(), (Sizes{40, 16}));
    EXPECT_TRUE(pe->table.requires_grad());
    EXPECT_NEAR(pe->table.std().item<double>(), 0.02, 0.005);  // normal(0, 0.02)
  }
  EXPECT_TRUE(encoder->named_parameters().contains("pos_encoding.table"));
  EXPECT_TRUE(decoder->named_parameters().contains("pos_encoding.table"));
  // A repeated token: the positions differ by the table alone.
  const auto src = torch::full({1, 6}, 3, torch::kLong);
  auto states = encoder->forward(src, torch::tensor({6})).states;  // [1, 6, 16]
  EXPECT_GT((states - states.narrow(1, 0, 1)).abs().max().item<double>(), 1e-4);
  states.sum().backward();
  const auto grad_rows = enc->pos_encoding->table.grad().abs().sum(1);  // [40]
  EXPECT_GT(grad_rows.narrow(0, 0, 6).min().item<double>(), 0.0);
  EXPECT_EQ(grad_rows.narrow(0, 6, 34).max().item<double>(), 0.0);
  testutil::expect_incremental_equals_full(*encoder, *decoder);
  // Past max_len: the message names the limit.
  encoder->eval();
  EXPECT_THROW(encoder->forward(torch::full({1, 41}, 3, torch::kLong), torch::tensor({41})), std::exception);
}

TEST_F(TransformerPlugins, DefaultsAreD2ls) {
  auto decoder = registry.create<nn::Decoder>(yaml("model: transformer"), ctx);
  auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  ASSERT_NE(dec, nullptr);
  EXPECT_EQ(dec->options.num_hiddens(), 256);
  EXPECT_EQ(dec->options.ffn_num_hiddens(), 64);
  EXPECT_EQ(dec->options.num_heads(), 4);
  EXPECT_EQ(dec->options.num_blks(), 2);
  EXPECT_DOUBLE_EQ(dec->options.dropout(), 0.2);
  EXPECT_FALSE(dec->options.bias());
  EXPECT_EQ(dec->options.norm(), nn::NormPlacement::Last);
  EXPECT_FALSE(dec->final_ln);
  // positional_encoding auto with dot products: d2l's sinusoidal encoding.
  EXPECT_EQ(dec->options.positional_encoding(), nn::AbsolutePositions::Auto);
  EXPECT_EQ(dec->pos_encoding->kind(), nn::AbsolutePositions::Sinusoidal);
  EXPECT_EQ(dec->options.vocab_size(), 21);
}

TEST_F(TransformerPlugins, FusedOptionReachesEveryAddNorm) {
  for (const bool fused : {true, false}) {
    const std::string options = fused ? "" : ", fused: false";  // default: true
    auto encoder = registry.create<nn::Encoder>(yaml("model: {plugin: transformer" + options + "}"), ctx);
    auto decoder = registry.create<nn::Decoder>(yaml("model: {plugin: transformer" + options + "}"), ctx);
    int seen = 0;
    for (const torch::nn::Module* model :
         {static_cast<torch::nn::Module*>(encoder.get()), static_cast<torch::nn::Module*>(decoder.get())}) {
      for (const auto& module : model->modules()) {
        if (const auto* addnorm = dynamic_cast<const nn::AddNormImpl*>(module.get())) {
          EXPECT_EQ(addnorm->fused, fused);
          ++seen;
        }
      }
    }
    EXPECT_EQ(seen, 2 * 2 + 2 * 3);  // 2 encoder blocks of 2, 2 decoder blocks of 3
  }
}

TEST_F(TransformerPlugins, HeadsMustDivideWidth) {
  auto msg = message_of<ConfigError>(
      [&] { registry.create<nn::Encoder>(yaml("model: {plugin: transformer, num_hiddens: 255}"), ctx); });
  EXPECT_NE(msg.find("4 heads do not divide num_hiddens 255"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test.yaml"), std::string::npos) << msg;
}

TEST_F(TransformerPlugins, BadOptionsAreConfigErrors) {
  auto unknown_attention = message_of<ConfigError>(
      [&] { registry.create<nn::Encoder>(yaml("model: {plugin: transformer, attention: {scorr: dot_product}}"), ctx); });
  EXPECT_NE(unknown_attention.find("did you mean 'scorer'"), std::string::npos) << unknown_attention;
  auto unknown_scorer = message_of<ConfigError>(
      [&] { registry.create<nn::Decoder>(yaml("model: {plugin: transformer, attention: {scorer: dot_prodct}}"), ctx); });
  EXPECT_NE(unknown_scorer.find("dot_product"), std::string::npos) << unknown_scorer;
  auto norm = message_of<ConfigError>(
      [&] { registry.create<nn::Decoder>(yaml("model: {plugin: transformer, norm: middle}"), ctx); });
  EXPECT_NE(norm.find("first|last"), std::string::npos) << norm;
  auto dropout = message_of<ConfigError>(
      [&] { registry.create<nn::Decoder>(yaml("model: {plugin: transformer, dropout: 1.5}"), ctx); });
  EXPECT_NE(dropout.find("expected <= 1"), std::string::npos) << dropout;
}

TEST_F(TransformerPlugins, NeedsVocabularies) {
  ctx.data.src_vocab_size = 0;
  auto msg = message_of<ConfigError>([&] { registry.create<nn::Encoder>(yaml("model: transformer"), ctx); });
  EXPECT_NE(msg.find("src_vocab_size 0"), std::string::npos) << msg;
  ctx.data.tgt_vocab_size = 0;
  msg = message_of<ConfigError>([&] { registry.create<nn::Decoder>(yaml("model: transformer"), ctx); });
  EXPECT_NE(msg.find("tgt_vocab_size 0"), std::string::npos) << msg;
}

TEST_F(TransformerPlugins, DotProductNeedsEqualSizes) {
  nn::ScorerContext sc;
  sc.query_size = 8;
  sc.key_size = 16;
  auto msg = message_of<ConfigError>([&] { registry.create<nn::Scorer>(yaml("model: dot_product"), ctx, sc); });
  EXPECT_NE(msg.find("query size 8 and key size 16"), std::string::npos) << msg;
  sc.key_size = 8;
  auto scorer = registry.create<nn::Scorer>(yaml("model: dot_product"), ctx, sc);
  EXPECT_EQ(scorer->score(torch::ones({1, 2, 8}), torch::ones({1, 3, 8}), {}).sizes(), (Sizes{1, 2, 3}));
}

/// The scorer inside a multi-head attention module (registered as attention.scorer), as T.
/// Who made the scorer of `mha`: "scorer 'additive' (<library>) at '<YAML path>'" (plugin::Made).
/// The scorer classes live in their plugins, so a test can tell them apart by that alone.
std::string scorer_of(nn::MultiHeadAttention& mha) {
  auto* scorer = dynamic_cast<nn::Scorer*>(mha->named_modules()["attention.scorer"].get());
  return scorer ? scorer->made_by() : "(no scorer)";
}

TEST_F(TransformerPlugins, SelfAndCrossAttentionTakeTheirOwnScorers) {
  const std::string model = "model: {plugin: transformer, num_hiddens: 16, num_heads: 4, num_blks: 2, attention: ";
  auto decoder = registry.create<nn::Decoder>(yaml(model + "{scorer: average, self_scorer: additive}}"), ctx);
  auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  ASSERT_NE(dec, nullptr);
  for (auto& blk : dec->blocks) {
    EXPECT_TRUE(testutil::contains(scorer_of(blk->attention1), "scorer 'additive' ("));  // self_scorer
    EXPECT_TRUE(testutil::contains(scorer_of(blk->attention2), "scorer 'average' ("));   // no cross_scorer: scorer
  }
  decoder = registry.create<nn::Decoder>(yaml(model + "{scorer: additive, cross_scorer: {plugin: dot_product}}}"), ctx);
  dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  EXPECT_TRUE(testutil::contains(scorer_of(dec->blocks[0]->attention1), "scorer 'additive' ("));
  EXPECT_TRUE(testutil::contains(scorer_of(dec->blocks[0]->attention2), "scorer 'dot_product' ("));
  // Each scorer knows which plugin made it and where it is configured.
  const std::string self = scorer_of(dec->blocks[1]->attention1);
  EXPECT_TRUE(testutil::contains(self, "scorer 'additive' (")) << self;
  EXPECT_TRUE(testutil::contains(self, ") at 'model.attention.scorer'")) << self;
  // The encoder's self-attention: self_scorer, else scorer; it has no cross-attention to configure.
  auto encoder = registry.create<nn::Encoder>(yaml(model + "{scorer: average, self_scorer: additive}}"), ctx);
  auto* enc = dynamic_cast<nn::TransformerEncoderImpl*>(encoder.get());
  ASSERT_NE(enc, nullptr);
  EXPECT_TRUE(testutil::contains(scorer_of(enc->blocks[0]->attention), "scorer 'additive' ("));
  auto msg =
      message_of<ConfigError>([&] { registry.create<nn::Encoder>(yaml(model + "{cross_scorer: additive}}"), ctx); });
  EXPECT_NE(msg.find("unknown option 'cross_scorer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Known options: scorer, self_scorer"), std::string::npos) << msg;
}

// A dataset whose padded sequences are longer than max_len: one config error at max_len's place,
// before anything trains (not an error from the first forward()).
TEST_F(TransformerPlugins, MaxLenShorterThanTheDatasetsSequencesIsAConfigError) {
  ctx.data.num_steps = 8;
  for (const char* encoding : {"sinusoidal", "learned", "none"}) {
    const auto node = yaml(std::string("model: {plugin: transformer, max_len: 4, positional_encoding: ") + encoding + "}");
    for (const auto& msg : {message_of<ConfigError>([&] { registry.create<nn::Encoder>(node, ctx); }),
                            message_of<ConfigError>([&] { registry.create<nn::Decoder>(node, ctx); })}) {
      EXPECT_NE(msg.find("test.yaml:1:"), std::string::npos) << msg;
      EXPECT_NE(msg.find("max_len 4 is shorter than the dataset's sequences (8 steps, dataset.num_steps)"),
                std::string::npos)
          << msg;
    }
  }
  EXPECT_NO_THROW(registry.create<nn::Encoder>(yaml("model: {plugin: transformer, max_len: 8}"), ctx));
}

TEST_F(TransformerPlugins, AnErrorInAPluginsForwardNamesThePlugin) {
  // A source longer than the encoder's positional encoding fails inside its forward(): the error
  // names the encoder plugin, its library and its place, without torch's backtrace.
  auto node = yaml("model: {plugin: transformer, num_hiddens: 16, num_heads: 4, num_blks: 1, max_len: 4}");
  nn::EncoderDecoder model(registry.create<nn::Encoder>(node, ctx), registry.create<nn::Decoder>(node, ctx));
  const auto ids = torch::TensorOptions(torch::kLong);
  auto msg = message_of<PluginError>([&] {
    model->forward(torch::zeros({1, 6}, ids), torch::tensor({6}), torch::zeros({1, 2}, ids));
  });
  EXPECT_EQ(msg.rfind("plugin encoder 'transformer' (", 0), 0u) << msg;
  EXPECT_NE(msg.find(") at 'model' failed in forward(): "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("Exception raised from"), std::string::npos) << msg;
  // The decoder's, when the target is the one too long (step by step: at the 5th step).
  auto state = model->init_state(model->encode(torch::zeros({1, 3}, ids), torch::tensor({3})), true);
  for (int i = 0; i < 4; ++i) model->decode(torch::zeros({1, 1}, ids), *state);
  msg = message_of<PluginError>([&] { model->decode(torch::zeros({1, 1}, ids), *state); });
  EXPECT_EQ(msg.rfind("plugin decoder 'transformer' (", 0), 0u) << msg;
}

}  // namespace
