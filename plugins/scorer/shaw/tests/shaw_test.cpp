// The shaw scorer plugin (relative position representations, Shaw et al. 2018, key side) as the
// runner loads it: scores against the paper's formula written out position by position, scores
// that depend on relative positions only, the fused path equal to the explicit one (the table's
// gradient included), step-by-step decoding with the cache equal to the full causal forward, bad
// uses refused, and the real runner training with it.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include "testing/golden.hpp"
#include "testing/position_scorers.hpp"
#include "testing/testing.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;
using testutil::message_of;
using testutil::ScorerExperimentRun;
using Role = nn::ScorerContext::Role;

class Shaw : public testutil::ScorerPluginTest {
 protected:
  /// A shaw scorer whose table holds random values (it starts at zero, where positions do not show).
  std::shared_ptr<nn::Scorer> trained(const std::string& text, const nn::ScorerContext& c) {
    auto s = scorer(text, c);
    torch::NoGradGuard no_grad;
    for (auto& p : s->parameters()) p.normal_();
    return s;
  }
  /// Every shaw table in `m` filled with random values.
  static void randomise_tables(torch::nn::Module& m) {
    torch::NoGradGuard no_grad;
    for (auto& p : m.named_parameters()) {
      if (p.key().find("relative_keys") != std::string::npos) p.value().normal_();
    }
  }
};

TEST_F(Shaw, ScoresAreThePapersFormula) {
  const int64_t k = 2, d = 4;
  auto s = trained("{plugin: shaw, max_distance: 2}", context(2, d));
  const auto table = s->named_parameters()["relative_keys"].to(torch::kDouble);  // [5, 4]
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{2 * k + 1, d}));
  auto q = torch::randn({4, 3, d}), keys = torch::randn({4, 6, d});
  const nn::Positions at{4, 1};
  auto scores = s->score(q, keys, at).to(torch::kDouble);  // [4, 3, 6]
  auto qd = q.to(torch::kDouble), kd = keys.to(torch::kDouble);
  for (int64_t b = 0; b < 4; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        const int64_t r = std::clamp<int64_t>((at.key_offset + j) - (at.query_offset + i), -k, k);
        const double want = (qd[b][i] * (kd[b][j] + table[r + k])).sum().item<double>() / std::sqrt(double(d));
        EXPECT_NEAR(scores[b][i][j].item<double>(), want, 1e-5) << b << " " << i << " " << j;
      }
    }
  }
}

TEST_F(Shaw, ScoresDependOnRelativePositionsOnly) {
  auto s = trained("shaw", context(2, 4));
  auto q = torch::randn({2, 3, 4}), k = torch::randn({2, 5, 4});
  EXPECT_ALLCLOSE(s->score(q, k, {0, 0}), s->score(q, k, {7, 7}), 1e-5, 1e-6);
  EXPECT_FALSE(torch::allclose(s->score(q, k, {0, 0}), s->score(q, k, {3, 0}), 1e-3, 1e-4));
}

TEST_F(Shaw, FusedPathEqualsExplicitPath) {
  testutil::expect_fused_equals_explicit(trained("{plugin: shaw, max_distance: 3}", context(3, 8)));
}

TEST_F(Shaw, StepByStepDecodingEqualsTheFullCausalForward) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 2, "
                            "positional_encoding: none, attention: ";
  auto encoder = registry.create<nn::Encoder>(yaml(model + "{scorer: shaw}}"), ctx);
  auto decoder = registry.create<nn::Decoder>(
      yaml(model + "{self_scorer: {plugin: shaw, max_distance: 2}, cross_scorer: dot_product}}"), ctx);
  randomise_tables(*encoder);
  randomise_tables(*decoder);
  testutil::expect_incremental_equals_full(*encoder, *decoder);
  nn::ScorerFactory scorers = [&](const nn::ScorerContext& c) {
    return c.role == Role::Self ? trained("shaw", c) : scorer("dot_product", c);
  };
  EXPECT_EQ(testutil::block_steps_equal_full(scorers), std::make_pair(true, false));
}

TEST_F(Shaw, RefusesCrossAttentionAndBadOptions) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, num_heads: 4, num_blks: 1, attention: ";
  auto cross = message_of<ConfigError>([&] { registry.create<nn::Decoder>(yaml(model + "{scorer: shaw}}"), ctx); });
  EXPECT_NE(cross.find("test.yaml:1:"), std::string::npos) << cross;
  EXPECT_NE(cross.find("shaw"), std::string::npos) << cross;
  EXPECT_NE(cross.find("uses it for cross-attention"), std::string::npos) << cross;
  EXPECT_NE(cross.find("`attention.cross_scorer: dot_product`"), std::string::npos) << cross;
  auto zero = message_of<ConfigError>([&] { scorer("{plugin: shaw, max_distance: 0}", context(2, 4)); });
  EXPECT_NE(zero.find("max_distance"), std::string::npos) << zero;
}

TEST_F(ScorerExperimentRun, ShawTrainsTheFraEngTransformerAndRecordsItsAttention) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(expect_self_attention_run("transformer_fra_eng_d2l017_shaw.yaml", "shaw"));
  const auto model = config::parse_yaml(rd.config(), "config").at("model");
  for (const char* side : {"encoder", "decoder"}) EXPECT_EQ(model.at(side).at("positional_encoding").str(), "none");
}

}  // namespace
