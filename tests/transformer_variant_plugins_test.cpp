// The TF-lab options of the transformer encoder/decoder plugins, through the registry: they reach
// the modules, the decoder-only ones are unknown to the encoder, and a TF-lab model trains.
#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/registry.hpp>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;

class TransformerVariantPlugins : public testutil::RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    ctx.data.src_vocab_size = ctx.data.tgt_vocab_size = 29;
  }
  config::Node yaml(const std::string& text) { return config::parse_yaml(text, "test.yaml").at("model"); }
};

TEST_F(TransformerVariantPlugins, TfLabOptionsReachTheModules) {
  const std::string common =
      "plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 1, bias: true, "
      "init: glorot_uniform, layer_norm_eps: 1.0e-6, ffn: conv1d, per_head_projections: true";
  auto encoder = registry.create<nn::Encoder>(yaml("model: {" + common + "}"), ctx);
  auto decoder =
      registry.create<nn::Decoder>(yaml("model: {" + common + ", tie_embeddings: true, output: softmax}"), ctx);
  auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  ASSERT_NE(dec, nullptr);
  EXPECT_TRUE(dec->options.tie_embeddings());
  EXPECT_TRUE(dec->outputs_probabilities());
  EXPECT_FALSE(dec->dense);
  EXPECT_TRUE(dec->blocks.at(0)->ffn->conv1);
  EXPECT_TRUE(dec->blocks.at(0)->attention2->W_k_heads);
  EXPECT_DOUBLE_EQ(dec->blocks.at(0)->addnorm2->ln->options.eps(), 1e-6);
  EXPECT_LE(dec->embedding->weight.abs().max().item<double>(), 0.05);  // Keras's embedding init

  nn::EncoderDecoder model(encoder, decoder);
  auto probs =
      model->forward(torch::randint(0, 29, {3, 11}), torch::tensor({11, 5, 2}), torch::randint(0, 29, {3, 11}));
  EXPECT_EQ(probs.sizes(), (std::vector<int64_t>{3, 11, 29}));
  EXPECT_ALLCLOSE(probs.sum(-1), torch::ones({3, 11}), 1e-5, 1e-5);
  torch::log(probs).mean().backward();
  EXPECT_TRUE(dec->embedding->weight.grad().defined());
}

TEST_F(TransformerVariantPlugins, DecoderOnlyOptionsAreUnknownToTheEncoder) {
  try {
    registry.create<nn::Encoder>(yaml("model: {plugin: transformer, tie_embeddings: true}"), ctx);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tie_embeddings"), std::string::npos) << e.what();
  }
  EXPECT_THROW(registry.create<nn::Decoder>(yaml("model: {plugin: transformer, ffn: conv2d}"), ctx), ConfigError);
  EXPECT_THROW(registry.create<nn::Decoder>(yaml("model: {plugin: transformer, output: probs}"), ctx), ConfigError);
}

TEST_F(TransformerVariantPlugins, FairseqInitIsAChoiceOfBoth) {
  ctx.data.src_vocab_size = ctx.data.tgt_vocab_size = 2000;
  auto encoder =
      registry.create<nn::Encoder>(yaml("model: {plugin: transformer, num_hiddens: 64, init: fairseq}"), ctx);
  auto* enc = dynamic_cast<nn::TransformerEncoderImpl*>(encoder.get());
  ASSERT_NE(enc, nullptr);
  EXPECT_NEAR(enc->embedding->weight.std().item<double>(), 0.125, 0.005);  // 64^-1/2
  auto decoder =
      registry.create<nn::Decoder>(yaml("model: {plugin: transformer, num_hiddens: 64, init: fairseq}"), ctx);
  auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
  ASSERT_NE(dec, nullptr);
  EXPECT_NEAR(dec->embedding->weight.std().item<double>(), 0.125, 0.005);
  try {
    registry.create<nn::Encoder>(yaml("model: {plugin: transformer, init: fairsq}"), ctx);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fairseq"), std::string::npos) << e.what();
  }
}

TEST_F(TransformerVariantPlugins, AttentionDropoutIsTheAttentionWeightsOwn) {
  const std::string common = "plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 1";
  auto attention_p = [&](const std::string& options) {
    auto decoder = registry.create<nn::Decoder>(yaml("model: {" + common + ", " + options + "}"), ctx);
    auto* dec = dynamic_cast<nn::TransformerDecoderImpl*>(decoder.get());
    EXPECT_NE(dec, nullptr);
    const double self = dec->blocks.at(0)->attention1->options.dropout();
    EXPECT_EQ(dec->blocks.at(0)->attention2->options.dropout(), self);  // cross-attention too
    return self;
  };
  EXPECT_EQ(attention_p("dropout: 0.3"), 0.3);  // unset: the model's dropout, as before
  EXPECT_EQ(attention_p("dropout: 0.3, attention_dropout: null"), 0.3);
  EXPECT_EQ(attention_p("dropout: 0.3, attention_dropout: 0"), 0.0);
  EXPECT_EQ(attention_p("dropout: 0.0, attention_dropout: 0.1"), 0.1);

  // What it does: with no other dropout, a train-mode forward is an eval-mode one unless the
  // attention weights are dropped. (Up to float rounding: in training the residual's add & norm is
  // the fused kernel, in eval torch's composition.)
  auto train_moves_it = [&](const std::string& options) {
    auto encoder = registry.create<nn::Encoder>(yaml("model: {" + common + ", " + options + "}"), ctx);
    const auto src = torch::randint(0, 29, {2, 7});
    const auto lens = torch::tensor({7, 4});
    encoder->eval();
    const auto expected = encoder->forward(src, lens).states;
    encoder->train();
    return !torch::allclose(encoder->forward(src, lens).states, expected, 1e-4, 1e-5);
  };
  EXPECT_FALSE(train_moves_it("dropout: 0.0"));
  EXPECT_FALSE(train_moves_it("dropout: 0.0, attention_dropout: 0"));
  EXPECT_TRUE(train_moves_it("dropout: 0.0, attention_dropout: 0.5"));

  try {
    registry.create<nn::Encoder>(yaml("model: {plugin: transformer, attention_dropout: 1.5}"), ctx);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("test.yaml:1:49"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected <= 1, found 1.5"), std::string::npos) << e.what();
  }
}

}  // namespace
