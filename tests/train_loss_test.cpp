// train::token_loss: cross-entropy over non-pad labels with label smoothing, for logits and for
// decoders that return probabilities, against torch's own cross_entropy(label_smoothing) and a
// value worked out by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <attnlab/error.hpp>
#include <attnlab/train/loss.hpp>

#include <cmath>
#include <limits>

#include "testing/testing.hpp"

namespace {
using attnlab::train::token_loss;
using attnlab::train::TokenLoss;
namespace F = torch::nn::functional;

constexpr int64_t kPad = 1;

class TokenLossTest : public attnlab::testutil::SeededTest {};

TEST_F(TokenLossTest, MatchesTorchsCrossEntropyWithLabelSmoothing) {
  const auto logits = torch::randn({3, 5, 7});
  auto labels = torch::randint(0, 7, {3, 5});
  labels.index_put_({0, 4}, kPad);
  labels.index_put_({2, torch::indexing::Slice(2)}, kPad);
  for (double eps : {0.0, 0.1, 0.3}) {
    for (auto reduce : {TokenLoss::Reduce::mean, TokenLoss::Reduce::sum}) {
      const bool mean = reduce == TokenLoss::Reduce::mean;
      const auto want =
          F::cross_entropy(logits.reshape({-1, 7}), labels.reshape(-1),
                           F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(eps).reduction(
                               mean ? F::CrossEntropyFuncOptions::reduction_t(torch::kMean) : torch::kSum));
      const TokenLoss how{.pad = kPad, .label_smoothing = eps, .reduce = reduce};
      EXPECT_NEAR(token_loss(logits, labels, how).item<double>(), want.item<double>(), 1e-6) << eps;
      // A decoder that returns softmax probabilities gets the same loss and the same gradient.
      auto a = logits.clone().requires_grad_(true), b = logits.clone().requires_grad_(true);
      auto from_logits = token_loss(a, labels, how);
      TokenLoss probs = how;
      probs.probabilities = true;
      auto from_probabilities = token_loss(torch::softmax(b, -1), labels, probs);
      EXPECT_NEAR(from_probabilities.item<double>(), from_logits.item<double>(), 1e-5) << eps;
      from_logits.backward();
      from_probabilities.backward();
      EXPECT_ALLCLOSE(b.grad(), a.grad(), 1e-5, 1e-6);
    }
  }
}

TEST_F(TokenLossTest, AWorkedExample) {
  // One label of class 2 over p = (0.1, 0.2, 0.3, 0.4), ε = 0.2:
  // 0.8 · -ln 0.3 + 0.2 · mean(-ln 0.1, -ln 0.2, -ln 0.3, -ln 0.4).
  const auto p = torch::tensor({0.1, 0.2, 0.3, 0.4}, torch::kDouble).reshape({1, 1, 4});
  const auto label = torch::tensor({2}, torch::kLong).reshape({1, 1});
  const double want = 0.8 * -std::log(0.3) + 0.2 * (-std::log(0.1) - std::log(0.2) - std::log(0.3) - std::log(0.4)) / 4;
  TokenLoss how{.pad = kPad, .probabilities = true, .label_smoothing = 0.2};
  EXPECT_NEAR(token_loss(p, label, how).item<double>(), want, 1e-12);
  how.probabilities = false;
  EXPECT_NEAR(token_loss(torch::log(p), label, how).item<double>(), want, 1e-12);  // log p: logits of p
}

TEST_F(TokenLossTest, OnlyPadLabels) {
  const auto out = torch::softmax(torch::randn({2, 3, 4}), -1);
  const auto labels = torch::full({2, 3}, kPad, torch::kLong);
  for (bool probabilities : {false, true}) {
    TokenLoss how{.pad = kPad, .probabilities = probabilities, .label_smoothing = 0.1};
    EXPECT_TRUE(std::isnan(token_loss(out, labels, how).item<double>())) << probabilities;  // a mean of nothing
    how.reduce = TokenLoss::Reduce::sum;
    EXPECT_EQ(token_loss(out, labels, how).item<double>(), 0.0) << probabilities;
  }
}

TEST_F(TokenLossTest, SmoothingOutsideItsRangeIsAConfigError) {
  const auto out = torch::randn({1, 2, 3});
  const auto labels = torch::zeros({1, 2}, torch::kLong);
  for (double eps : {-0.1, 1.0, std::numeric_limits<double>::quiet_NaN()}) {
    const auto msg = attnlab::testutil::message_of<attnlab::ConfigError>(
        [&] { token_loss(out, labels, {.pad = kPad, .label_smoothing = eps}); });
    EXPECT_NE(msg.find("label smoothing must be in [0, 1)"), std::string::npos) << msg;
  }
}

}  // namespace
