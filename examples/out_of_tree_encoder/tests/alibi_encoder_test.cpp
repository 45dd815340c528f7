// The plugin as the runner sees it: loaded from its library (ATTNLAB_PLUGIN_FILE, set by
// attnlab_add_plugin's TESTS), built from YAML options by the registry.
#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <string>

namespace {
using namespace attnlab;

/// The registry with the plugin loaded; make() builds an encoder (seed 0, eval mode) for a source
/// vocabulary of 11 tokens.
class AlibiEncoder : public ::testing::Test {
 protected:
  void SetUp() override { registry_.load(ATTNLAB_PLUGIN_FILE); }

  std::shared_ptr<nn::Encoder> make(const std::string& yaml) {
    plugin::BuildContext ctx;
    ctx.data.src_vocab_size = 11;
    torch::manual_seed(0);
    auto encoder = registry_.create<nn::Encoder>(config::parse_yaml(yaml, "test.yaml"), ctx);
    encoder->eval();
    return encoder;
  }

 private:
  plugin::Registry registry_;
};

/// Sets every W_q and W_k to zero: q . k = 0, so the scores are ALiBi's bias alone.
void zero_queries_and_keys(nn::Encoder& encoder) {
  torch::NoGradGuard no_grad;
  for (auto& item : encoder.named_parameters()) {
    const std::string& name = item.key();
    if (name.find("W_q") != std::string::npos || name.find("W_k") != std::string::npos) item.value().zero_();
  }
}

TEST_F(AlibiEncoder, WithoutQueriesAndKeysTheWeightsAreTheSoftmaxOfTheDistanceBias) {
  auto encoder = make("plugin: alibi_transformer\nnum_hiddens: 8\nnum_heads: 4\nnum_blks: 2\ndropout: 0\n");
  zero_queries_and_keys(*encoder);
  auto src = torch::randint(0, 11, {2, 5}, torch::kLong);
  auto valid = torch::tensor({5, 3}, torch::kLong);
  nn::AttentionRecorder recorder;
  nn::RecordingScope scope(&recorder);
  auto out = encoder->forward(src, valid);
  ASSERT_EQ(out.states.sizes(), (std::vector<int64_t>{2, 5, 8}));
  auto recorded = recorder.module(nn::kEncoderSelf);
  EXPECT_EQ(recorded.queries, nn::Side::Source);
  EXPECT_EQ(recorded.keys, nn::Side::Source);
  EXPECT_EQ(recorded.layers, (std::vector<int64_t>{0, 1}));
  const auto& w = recorded.weights;
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2, 2, 4, 5, 5}));  // [layers, B, heads, Q, K]
  // Head h (1-based) of 4 has slope 2^(-8h/4); query i weighs key j < valid by exp(-m|i-j|).
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t keys = valid[b].item<int64_t>();
    for (int64_t h = 0; h < 4; ++h) {
      const double m = std::pow(2.0, -2.0 * static_cast<double>(h + 1));
      for (int64_t i = 0; i < 5; ++i) {
        double total = 0;
        for (int64_t j = 0; j < keys; ++j) total += std::exp(-m * std::abs(static_cast<double>(i - j)));
        for (int64_t j = 0; j < 5; ++j) {
          const double want = j < keys ? std::exp(-m * std::abs(static_cast<double>(i - j))) / total : 0.0;
          for (int64_t layer = 0; layer < 2; ++layer) {
            EXPECT_NEAR(w[layer][b][h][i][j].item<double>(), want, 1e-5)
                << "layer " << layer << " sequence " << b << " head " << h << " query " << i << " key " << j;
          }
        }
      }
    }
  }
}

TEST_F(AlibiEncoder, OrderReachesTheStatesOnlyThroughTheBias) {
  // Nothing is added to the embeddings: a sequence of one token gives the same state at every
  // position (a sinusoidal encoding would make them differ).
  auto encoder = make("plugin: alibi_transformer\nnum_hiddens: 8\nnum_heads: 2\nnum_blks: 1\ndropout: 0\n");
  auto same = torch::full({1, 4}, 3, torch::kLong);
  auto states = encoder->forward(same, torch::tensor({4}, torch::kLong)).states;
  EXPECT_TRUE(torch::allclose(states[0][0], states[0][3], 1e-5, 1e-6));
  auto mixed = torch::tensor({{3, 5, 3, 3}}, torch::kLong);
  auto s2 = encoder->forward(mixed, torch::tensor({4}, torch::kLong)).states;
  // Positions 0 and 3 hold the same token, so the same query, over the same keys: only the bias,
  // which sees that the 5 is one step from 0 but two from 3, can tell them apart.
  EXPECT_FALSE(torch::allclose(s2[0][0], s2[0][3], 1e-4, 1e-5));
}

TEST_F(AlibiEncoder, NormFirstAddsAFinalLayerNorm) {
  auto last = make("plugin: alibi_transformer\nnum_hiddens: 8\nnum_heads: 2\n");
  auto first = make("plugin: alibi_transformer\nnum_hiddens: 8\nnum_heads: 2\nnorm: first\n");
  EXPECT_EQ(last->named_parameters().find("final_ln.weight"), nullptr);
  EXPECT_NE(first->named_parameters().find("final_ln.weight"), nullptr);
  EXPECT_EQ(first->output_size(), 8);
}

TEST_F(AlibiEncoder, HeadsThatAreNoPowerOfTwoAreAConfigErrorAtTheirPlace) {
  try {
    make("plugin: alibi_transformer\nnum_hiddens: 12\nnum_heads: 3\n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.yaml:3:"), std::string::npos) << what;
    EXPECT_NE(what.find("power of two, found 3"), std::string::npos) << what;
  }
}

}  // namespace
