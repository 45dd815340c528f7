// train::token_loss: cross-entropy over non-pad labels with label smoothing, for logits and for
// decoders that return probabilities, against torch's own cross_entropy(label_smoothing) and a
// value worked out by hand; train::rdrop_loss (R-Drop) against the paper's formula written with
// torch's kl_div, and by hand.
#include <gtest/gtest.h>
#include <torch/nn/functional.h>
#include <attnlab/error.hpp>
#include <attnlab/train/loss.hpp>

#include <cmath>
#include <limits>

#include "testing/testing.hpp"

namespace {
using attnlab::train::rdrop_loss;
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

TEST_F(TokenLossTest, RDropIsThePapersLossHalved) {
  // Liang et al.'s Eq. 3, ℓ1 + ℓ2 + α/2 · (KL(p1‖p2) + KL(p2‖p1)) per label, halved; KL(p‖q)
  // as torch's kl_div(log q, p) = p (log p - log q).
  const auto out1 = torch::randn({3, 5, 7}, torch::kDouble), out2 = torch::randn({3, 5, 7}, torch::kDouble);
  auto labels = torch::randint(0, 7, {3, 5});
  labels.index_put_({1, torch::indexing::Slice(3)}, kPad);
  const auto keep = labels.ne(kPad).to(torch::kDouble);  // [3, 5]
  const auto n = keep.sum().item<double>();
  const auto lp1 = torch::log_softmax(out1, -1), lp2 = torch::log_softmax(out2, -1);
  const auto kl = [](const torch::Tensor& p_log, const torch::Tensor& q_log) {  // KL(p‖q) per label, [3, 5]
    return F::kl_div(q_log, p_log.exp(), F::KLDivFuncOptions().reduction(torch::kNone)).sum(-1);
  };
  const auto symmetric = ((kl(lp1, lp2) + kl(lp2, lp1)) * keep).sum().item<double>();
  for (double eps : {0.0, 0.1}) {
    for (double alpha : {0.0, 0.7, 5.0}) {
      for (auto reduce : {TokenLoss::Reduce::mean, TokenLoss::Reduce::sum}) {
        TokenLoss how{.pad = kPad, .label_smoothing = eps, .reduce = TokenLoss::Reduce::sum};
        const double l1 = token_loss(out1, labels, how).item<double>(), l2 = token_loss(out2, labels, how).item<double>();
        const double eq3 = l1 + l2 + alpha / 2 * symmetric;
        const double want = (reduce == TokenLoss::Reduce::mean ? eq3 / n : eq3) / 2;
        how.reduce = reduce;
        EXPECT_NEAR(rdrop_loss(out1, out2, labels, how, alpha).item<double>(), want, 1e-10) << eps << " " << alpha;
        // A decoder that returns probabilities gets the same loss and the same gradients.
        auto a1 = out1.clone().requires_grad_(true), a2 = out2.clone().requires_grad_(true);
        auto b1 = out1.clone().requires_grad_(true), b2 = out2.clone().requires_grad_(true);
        auto from_logits = rdrop_loss(a1, a2, labels, how, alpha);
        TokenLoss probs = how;
        probs.probabilities = true;
        auto from_probabilities = rdrop_loss(torch::softmax(b1, -1), torch::softmax(b2, -1), labels, probs, alpha);
        EXPECT_NEAR(from_probabilities.item<double>(), from_logits.item<double>(), 1e-9) << eps << " " << alpha;
        from_logits.backward();
        from_probabilities.backward();
        EXPECT_ALLCLOSE(b1.grad(), a1.grad(), 1e-7, 1e-9);
        EXPECT_ALLCLOSE(b2.grad(), a2.grad(), 1e-7, 1e-9);
      }
    }
  }
}

TEST_F(TokenLossTest, RDropWorkedExample) {
  // p1 = (1/2, 1/2), p2 = (1/4, 3/4), label 0, α = 2: ℓ1 = ln 2, ℓ2 = ln 4, and the symmetric KL
  // is Σ (p1 - p2)(ln p1 - ln p2) = 1/4 ln 2 - 1/4 ln(2/3) = 1/4 ln 3; the loss is
  // (ln 2 + ln 4) / 2 + 2/4 · 1/4 ln 3.
  const auto p1 = torch::tensor({0.5, 0.5}, torch::kDouble).reshape({1, 1, 2});
  const auto p2 = torch::tensor({0.25, 0.75}, torch::kDouble).reshape({1, 1, 2});
  const auto label = torch::zeros({1, 1}, torch::kLong);
  const double want = 1.5 * std::log(2.0) + 0.125 * std::log(3.0);
  const TokenLoss how{.pad = kPad, .probabilities = true};
  EXPECT_NEAR(rdrop_loss(p1, p2, label, how, 2.0).item<double>(), want, 1e-12);
  EXPECT_NEAR(rdrop_loss(torch::log(p1), torch::log(p2), label, {.pad = kPad}, 2.0).item<double>(), want, 1e-12);
}

TEST_F(TokenLossTest, RDropOfOnePassTwiceIsTheTokenLossAndPullsDifferentPassesTogether) {
  const auto out = torch::randn({2, 4, 6});
  auto labels = torch::randint(0, 6, {2, 4});
  labels.index_put_({1, 3}, kPad);
  const TokenLoss how{.pad = kPad, .label_smoothing = 0.1};
  EXPECT_NEAR(rdrop_loss(out, out, labels, how, 5.0).item<double>(), token_loss(out, labels, how).item<double>(), 1e-6);
  // With α > 0 each pass's gradient gains the KL term's pull towards the other; at a pad
  // position the KL counts nothing.
  auto a = torch::randn({2, 4, 6}).requires_grad_(true), b = torch::randn({2, 4, 6}).requires_grad_(true);
  rdrop_loss(a, b, labels, how, 0.0).backward();
  const auto plain_a = a.grad().clone(), plain_b = b.grad().clone();
  a.mutable_grad().zero_();
  b.mutable_grad().zero_();
  rdrop_loss(a, b, labels, how, 5.0).backward();
  EXPECT_FALSE(torch::allclose(a.grad()[0], plain_a[0]));
  EXPECT_FALSE(torch::allclose(b.grad()[0], plain_b[0]));
  EXPECT_TRUE(torch::equal(a.grad()[1][3], plain_a[1][3]));
  EXPECT_TRUE(torch::equal(a.grad()[1][3], torch::zeros({6})));
  // Only pads: a mean of nothing is nan, a sum 0.
  const auto pads = torch::full({2, 4}, kPad, torch::kLong);
  EXPECT_TRUE(std::isnan(rdrop_loss(out, out, pads, how, 5.0).item<double>()));
  EXPECT_EQ(rdrop_loss(out, out, pads, {.pad = kPad, .reduce = TokenLoss::Reduce::sum}, 5.0).item<double>(), 0.0);
}

TEST_F(TokenLossTest, RDropRefusesANegativeAlphaAndPassesOfDifferentShapes) {
  const auto out = torch::randn({1, 2, 3});
  const auto labels = torch::zeros({1, 2}, torch::kLong);
  for (double alpha : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    const auto msg =
        attnlab::testutil::message_of<attnlab::ConfigError>([&] { rdrop_loss(out, out, labels, {.pad = kPad}, alpha); });
    EXPECT_NE(msg.find("R-Drop's alpha must be >= 0"), std::string::npos) << msg;
  }
  const auto msg = attnlab::testutil::message_of<attnlab::ConfigError>(
      [&] { rdrop_loss(out, torch::randn({1, 3, 3}), labels, {.pad = kPad}, 1.0); });
  EXPECT_NE(msg.find("differ in shape: [1, 2, 3] vs [1, 3, 3]"), std::string::npos) << msg;
}

}  // namespace
