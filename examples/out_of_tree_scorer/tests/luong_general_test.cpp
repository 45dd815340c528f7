// The plugin as the runner sees it: loaded from its library by the registry, built from options.
// ATTNLAB_PLUGIN_FILE is the plugin library's path (set by attnlab_add_plugin's TESTS).
#include <attnlab/config/node.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

namespace {
using namespace attnlab;

std::shared_ptr<nn::Scorer> make(plugin::Registry& r, const std::string& yaml, int64_t q, int64_t k) {
  nn::ScorerContext sizes;
  sizes.query_size = q;
  sizes.key_size = k;
  return r.create<nn::Scorer>(config::parse_yaml(yaml, "test.yaml"), plugin::BuildContext{}, sizes);
}

TEST(LuongGeneral, ScoresAreQueriesTimesWTimesKeys) {
  plugin::Registry r;
  r.load(ATTNLAB_PLUGIN_FILE);
  torch::manual_seed(0);
  auto scorer = make(r, "plugin: luong_general\n", 3, 5);
  auto w = scorer->named_parameters()["W"];
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{3, 5}));
  auto q = torch::randn({2, 4, 3}), k = torch::randn({2, 6, 5});
  auto s = scorer->score(q, k, {});
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{2, 4, 6}));
  // One entry by hand: q[1, 2] . W . k[1, 3]
  double want = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      want += q[1][2][i].item<double>() * w[i][j].item<double>() * k[1][3][j].item<double>();
    }
  }
  EXPECT_NEAR(s[1][2][3].item<double>(), want, 1e-5);
  // W learns: the scores' gradient reaches it.
  s.sum().backward();
  EXPECT_GT(w.grad().abs().sum().item<double>(), 0);
}

TEST(LuongGeneral, ScaleDividesBySqrtKeySize) {
  plugin::Registry r;
  r.load(ATTNLAB_PLUGIN_FILE);
  torch::manual_seed(0);
  auto plain = make(r, "plugin: luong_general\n", 4, 4);
  torch::manual_seed(0);
  auto scaled = make(r, "plugin: luong_general\nscale: true\n", 4, 4);
  auto q = torch::randn({1, 2, 4}), k = torch::randn({1, 3, 4});
  EXPECT_TRUE(torch::allclose(scaled->score(q, k, {}) * 2.0, plain->score(q, k, {})));
}

TEST(LuongGeneral, WithoutSizesItIsAConfigErrorNamingThePlace) {
  plugin::Registry r;
  r.load(ATTNLAB_PLUGIN_FILE);
  try {
    make(r, "plugin: luong_general\n", 0, 0);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("test.yaml:1:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("query and key sizes"), std::string::npos) << e.what();
  }
}

}  // namespace
