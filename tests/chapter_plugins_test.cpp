// The attention chapter's plugins created through the registry from config nodes: scorers on their
// own and inside the transformer, the GRU encoder/decoders, the kernel_regression dataset, and
// their option errors.
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/plugin/registry.hpp>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

#include <functional>
#include <string>

namespace {

using namespace attnlab;
using testutil::message_of;
using Sizes = std::vector<int64_t>;

class ChapterPlugins : public testutil::RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    ctx.data.src_vocab_size = 20;
    ctx.data.tgt_vocab_size = 21;
  }
  static nn::ScorerContext sized(int64_t q, int64_t k) {
    nn::ScorerContext c;
    c.query_size = q;
    c.key_size = k;
    return c;
  }
};

TEST_F(ChapterPlugins, ScorersFromTheRegistry) {
  // The classes live in their plugins: what a plugin made is seen through nn::Scorer's (torch
  // Module's) parameters and buffers, and plugin::Made.
  auto additive = registry.create<nn::Scorer>(yaml("additive"), ctx, sized(5, 3));
  EXPECT_TRUE(testutil::contains(additive->made_by(), "scorer 'additive' (")) << additive->made_by();
  auto params = additive->named_parameters();
  EXPECT_EQ(params["W_q.weight"].sizes(), (Sizes{3, 5}));  // num_hiddens 0 = the key size
  EXPECT_EQ(params["W_k.weight"].sizes(), (Sizes{3, 3}));
  auto wide = registry.create<nn::Scorer>(yaml("{plugin: additive, num_hiddens: 8}"), ctx, sized(5, 3));
  EXPECT_EQ(wide->named_parameters()["w_v.weight"].sizes(), (Sizes{1, 8}));

  auto kernel =
      registry.create<nn::Scorer>(yaml("{plugin: gaussian_kernel, learnable: true, w: 0.5}"), ctx, sized(1, 1));
  ASSERT_EQ(kernel->parameters().size(), 1u);  // learnable: w is the one parameter
  EXPECT_FLOAT_EQ(kernel->named_parameters()["w"].item<float>(), 0.5f);
  auto fixed = registry.create<nn::Scorer>(yaml("gaussian_kernel"), ctx, sized(1, 1));
  EXPECT_TRUE(fixed->parameters().empty());
  EXPECT_FLOAT_EQ(fixed->named_buffers()["w"].item<float>(), 1.0f);
  auto average = registry.create<nn::Scorer>(yaml("average"), ctx, nn::ScorerContext{});
  EXPECT_TRUE(testutil::contains(average->made_by(), "scorer 'average' (")) << average->made_by();
  EXPECT_TRUE(average->parameters().empty());
}

TEST_F(ChapterPlugins, ScorerErrorsNameThePlaceAndTheSizes) {
  auto no_sizes = message_of<ConfigError>(
      [&] { registry.create<nn::Scorer>(yaml("{plugin: additive}"), ctx, nn::ScorerContext{}); });
  EXPECT_NE(no_sizes.find("scorer 'additive'"), std::string::npos) << no_sizes;
  EXPECT_NE(no_sizes.find("query size 0 and key size 0"), std::string::npos) << no_sizes;
  auto sizes = message_of<ConfigError>([&] { registry.create<nn::Scorer>(yaml("gaussian_kernel"), ctx, sized(2, 3)); });
  EXPECT_NE(sizes.find("query size 2 and key size 3"), std::string::npos) << sizes;
  auto typo = message_of<ConfigError>(
      [&] { registry.create<nn::Scorer>(yaml("{plugin: gaussian_kernel, learnabel: true}"), ctx, sized(1, 1)); });
  EXPECT_NE(typo.find("did you mean 'learnable'"), std::string::npos) << typo;
}

TEST_F(ChapterPlugins, TransformerTakesAnyScorerAndRecordsItsWeights) {
  for (const char* scorer : {"additive", "{plugin: gaussian_kernel, learnable: true}", "average"}) {
    auto node = yaml(std::string("{plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, "
                                 "num_blks: 1, dropout: 0.0, attention: {scorer: ") +
                     scorer + "}}");
    auto encoder = registry.create<nn::Encoder>(node, ctx);
    nn::AttentionRecorder recorder;
    nn::RecordingScope scope(&recorder);
    auto out = encoder->forward(torch::randint(0, 20, {2, 5}), torch::tensor({5, 3}));
    EXPECT_EQ(out.states.sizes(), (Sizes{2, 5, 16})) << scorer;
    auto w = recorder.module(nn::kEncoderSelf).weights;  // [layers, B, heads, S, S]
    EXPECT_EQ(w.sizes(), (Sizes{1, 2, 4, 5, 5})) << scorer;
    EXPECT_ALLCLOSE(w.sum(-1), torch::ones({1, 2, 4, 5}), 1e-5, 1e-5);
    EXPECT_EQ(w.select(1, 1).narrow(-1, 3, 2).abs().max().item<float>(), 0.0f) << scorer;  // source padding
  }
}

TEST_F(ChapterPlugins, GruEncoderWithBahdanauOrPlainDecoder) {
  auto encoder = registry.create<nn::Encoder>(yaml("{plugin: gru, embed_size: 8, num_hiddens: 16}"), ctx);
  EXPECT_TRUE(testutil::contains(encoder->made_by(), "encoder 'gru' (")) << encoder->made_by();
  EXPECT_EQ(encoder->output_size(), 16);
  for (const char* dec : {"{plugin: gru_bahdanau, embed_size: 8, num_hiddens: 16}",
                          "{plugin: gru_bahdanau, embed_size: 8, num_hiddens: 16, attention: {scorer: dot_product}}",
                          "{plugin: gru, embed_size: 8, num_hiddens: 16}"}) {
    auto decoder = registry.create<nn::Decoder>(yaml(dec), ctx);
    nn::EncoderDecoder model(encoder, decoder);
    auto logits =
        model->forward(torch::randint(0, 20, {3, 6}), torch::tensor({6, 4, 2}), torch::randint(0, 21, {3, 5}));
    EXPECT_EQ(logits.sizes(), (Sizes{3, 5, 21})) << dec;
  }
  auto made = registry.create<nn::Decoder>(yaml("{plugin: gru_bahdanau, num_hiddens: 16}"), ctx);
  auto* scorer = dynamic_cast<nn::Scorer*>(made->named_modules()["attention.scorer"].get());
  ASSERT_NE(scorer, nullptr);
  EXPECT_TRUE(testutil::contains(scorer->made_by(), "scorer 'additive' (")) << scorer->made_by();  // the default
  auto typo = message_of<ConfigError>([&] { registry.create<nn::Decoder>(yaml("{plugin: gru, num_layer: 2}"), ctx); });
  EXPECT_NE(typo.find("did you mean 'num_layers'"), std::string::npos) << typo;
}

TEST_F(ChapterPlugins, KernelRegressionDataIsSeededAndShapedAsTheBook) {
  auto make = [&](const std::string& text, int64_t seed) {
    auto c = ctx;
    c.seed = seed;
    auto d = registry.create<data::Dataset>(yaml(text), c);
    d->prepare("");
    return d;
  };
  auto a = make("kernel_regression", 0), b = make("kernel_regression", 0), c = make("kernel_regression", 1);
  EXPECT_FALSE(a->has_split(data::Split::Val));
  EXPECT_EQ(a->info().num_features, 1);
  auto train = a->batches(data::Split::Train, false, 0);
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(train[0].src.sizes(), (Sizes{50, 1, 1}));
  EXPECT_EQ(train[0].tgt_out.sizes(), (Sizes{50, 1, 1}));
  auto x = train[0].src.view(-1), y = train[0].tgt_out.view(-1);
  EXPECT_TRUE(torch::equal(x, std::get<0>(x.sort())));  // sorted inputs
  EXPECT_GE(x.min().item<float>(), 0.0f);
  EXPECT_LT(x.max().item<float>(), 5.0f);
  auto noise = y - (2 * torch::sin(x) + x.pow(0.8));
  EXPECT_NEAR(noise.std().item<float>(), 0.5, 0.2);
  EXPECT_TRUE(torch::equal(x, b->batches(data::Split::Train, false, 0)[0].src.view(-1)));   // same seed
  EXPECT_FALSE(torch::equal(x, c->batches(data::Split::Train, false, 0)[0].src.view(-1)));  // other seed
  auto test = a->batches(data::Split::Test, false, 0)[0];
  auto xt = test.src.view(-1);
  EXPECT_EQ(xt.numel(), 50);  // 0, 0.1, ..., 4.9
  EXPECT_ALLCLOSE(xt, torch::arange(0.0, 5.0, 0.1, torch::kFloat));
  EXPECT_ALLCLOSE(test.tgt_out.view(-1), 2 * torch::sin(xt) + xt.pow(0.8));
  auto small = make("{plugin: kernel_regression, batch_size: 16}", 0);
  auto shuffled = small->batches(data::Split::Train, true, 7);
  ASSERT_EQ(shuffled.size(), 4u);
  std::vector<torch::Tensor> parts;
  for (auto& bt : shuffled) parts.push_back(bt.src.view(-1));
  auto all = torch::cat(parts);
  EXPECT_FALSE(torch::equal(all, x));
  EXPECT_TRUE(torch::equal(std::get<0>(all.sort()), x));
}

}  // namespace
