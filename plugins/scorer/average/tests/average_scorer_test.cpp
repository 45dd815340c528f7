// The average-pooling scorer on its own and inside multi-head attention.
#include "average_scorer.hpp"

#include "testing/scorer_toys.hpp"

#include <vector>

namespace attnlab::scorers::average {
namespace {

using Sizes = std::vector<int64_t>;
using nn::Attention;

class Scorers : public testutil::ScorerToys {};

TEST_F(Scorers, BookToyAverageGivesTheMeans) { expect_toy_means(std::make_shared<AverageScorerImpl>(), 2); }

TEST_F(Scorers, BookToyMultiHeadAttentionWithAverage) { expect_multi_head_toy(std::make_shared<AverageScorerImpl>()); }

TEST_F(Scorers, AverageIsTheMeanOfTheValidValues) {
  Attention attention(std::make_shared<AverageScorerImpl>(), 0.0);
  auto q = torch::randn({2, 3, 4}), k = torch::randn({2, 5, 7}), v = torch::randn({2, 5, 2});
  auto out = attention->forward(q, k, v, torch::tensor({2, 5}));  // [2, 3, 2]
  EXPECT_ALLCLOSE(out[0], v[0].narrow(0, 0, 2).mean(0, true).expand({3, 2}));
  EXPECT_ALLCLOSE(out[1], v[1].mean(0, true).expand({3, 2}));
  auto per_query = attention->forward(q, k, v, torch::tensor({1, 2, 3, 4, 5, 1}).view({2, 3}));
  EXPECT_ALLCLOSE(per_query[0][2], v[0].narrow(0, 0, 3).mean(0));
  EXPECT_ALLCLOSE(per_query[1][0], v[1].narrow(0, 0, 4).mean(0));
  EXPECT_TRUE(AverageScorer()->parameters().empty());
}

}  // namespace
}  // namespace attnlab::scorers::average
