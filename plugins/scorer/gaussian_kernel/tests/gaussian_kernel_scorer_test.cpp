// The Gaussian-kernel scorer on its own and inside multi-head attention: the book's toy outputs
// and the kernel's formula.
#include "gaussian_kernel_scorer.hpp"

#include "testing/scorer_toys.hpp"

#include <vector>

namespace attnlab::scorers::gaussian_kernel {
namespace {

using Sizes = std::vector<int64_t>;
using nn::Attention;

class Scorers : public testutil::ScorerToys {};

TEST_F(Scorers, BookToyGaussianKernelGivesTheMeans) {
  expect_toy_means(std::make_shared<GaussianKernelScorerImpl>(1.0, false), 2);
  expect_toy_means(std::make_shared<GaussianKernelScorerImpl>(0.3, true), 2);
}

TEST_F(Scorers, BookToyMultiHeadAttentionWithGaussianKernel) {
  expect_multi_head_toy(std::make_shared<GaussianKernelScorerImpl>(1.0, true));
}

TEST_F(Scorers, GaussianKernelIsMinusHalfSquaredScaledDistance) {
  auto q1 = torch::randn({2, 3, 1}), k1 = torch::randn({2, 5, 1});
  GaussianKernelScorer fixed(1.0, false), scaled(2.5, true);
  auto diff = q1 - k1.transpose(1, 2);  // [2, 3, 5]
  EXPECT_ALLCLOSE(fixed->score(q1, k1, {}), -diff.pow(2) / 2);
  EXPECT_ALLCLOSE(scaled->score(q1, k1, {}), -(diff * 2.5).pow(2) / 2);
  // Vectors: -w^2 |q - k|^2 / 2.
  auto q = torch::randn({2, 3, 4}), k = torch::randn({2, 5, 4});
  auto sq = (q.unsqueeze(2) - k.unsqueeze(1)).pow(2).sum(-1);  // [2, 3, 5]
  EXPECT_ALLCLOSE(scaled->score(q, k, {}), -6.25 * sq / 2, 1e-4, 1e-5);
  // Fixed w is a buffer (nothing to train); learnable w is one parameter that gets a gradient.
  EXPECT_TRUE(fixed->parameters().empty());
  ASSERT_EQ(scaled->parameters().size(), 1u);
  scaled->score(q1, k1, {}).sum().backward();
  EXPECT_TRUE(scaled->w().grad().defined());
  EXPECT_THROW(fixed->score(torch::randn({2, 3, 2}), torch::randn({2, 5, 3}), {}), c10::Error);
}

}  // namespace
}  // namespace attnlab::scorers::gaussian_kernel
