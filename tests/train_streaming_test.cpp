// StreamingLLM's evaluation (train/streaming.hpp): the evicting KV cache gives what a model that
// reads only the first tokens and the window gives, at the cache's positions; a window that holds
// every token is the full forward; models it cannot evict from are refused by name. The
// re-computation baseline is each window run afresh.
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer_lm.hpp>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "testing/testing.hpp"
#include "train/streaming.hpp"

namespace train_streaming_test {
namespace {
using namespace attnlab;

/// Scaled dot products minus 0.3 per position between query and key (ALiBi-like): its scores
/// depend on where the query and the key stand, so the test sees the positions the cache gives.
class DistanceScorer final : public nn::Scorer {
 public:
  torch::Tensor score(const torch::Tensor& q, const torch::Tensor& k, const nn::Positions& p) override {
    const auto i = torch::arange(p.query_offset, p.query_offset + q.size(1), torch::kDouble).unsqueeze(1);  // [Q, 1]
    const auto j = torch::arange(p.key_offset, p.key_offset + k.size(1), torch::kDouble).unsqueeze(0);    // [1, K]
    return torch::bmm(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(q.size(2))) -
           (0.3 * (i - j)).to(q.scalar_type());  // [B, Q, K]
  }
  bool encodes_positions() const override { return true; }
};

nn::TransformerLM lm_of(int64_t blocks, nn::AbsolutePositions positions) {
  torch::manual_seed(7);
  auto lm = nn::TransformerLM(nn::TransformerOptions(/*vocab=*/11, 16, 32, 2, blocks)
                                  .norm(nn::NormPlacement::First)
                                  .positional_encoding(positions)
                                  .max_len(64),
                              [](const nn::ScorerContext&) { return std::make_shared<DistanceScorer>(); });
  lm->eval();
  return lm;
}

torch::Tensor tokens_of(int64_t rows, int64_t length) {
  torch::manual_seed(11);
  return torch::randint(0, 11, {rows, length}, torch::kLong);
}

TEST(Streaming, OneLayerSeesTheSinksAndTheWindowAtTheCachesPositions) {
  // One layer: a token's key is its own projection, so the evicting cache at position t is the
  // model run afresh on the first `sinks` tokens followed by the `window` latest (positions 0..).
  auto lm = lm_of(1, nn::AbsolutePositions::None);
  torch::NoGradGuard no_grad;
  const auto tokens = tokens_of(3, 40);
  for (const auto& [window, sinks] : {std::pair<int64_t, int64_t>{6, 0}, {5, 1}, {4, 4}, {1, 2}}) {
    SCOPED_TRACE(testing::Message() << "window " << window << ", sinks " << sinks);
    const auto streamed = train::streaming_logits(*lm, tokens, window, sinks, "test");  // [3, 40, V]
    ASSERT_EQ(streamed.sizes(), (std::vector<int64_t>{3, 40, 11}));
    for (int64_t t = 0; t < 40; ++t) {
      const auto seen = t < sinks + window
                            ? tokens.narrow(1, 0, t + 1)
                            : torch::cat({tokens.narrow(1, 0, sinks), tokens.narrow(1, t - window + 1, window)}, 1);
      const auto fresh = lm->forward(seen).select(1, -1);  // [3, V]
      EXPECT_TRUE(torch::allclose(streamed.select(1, t), fresh, 1e-5, 1e-5)) << "position " << t;
    }
  }
}

TEST(Streaming, AWindowThatHoldsEveryTokenIsTheFullForward) {
  for (const auto positions : {nn::AbsolutePositions::None, nn::AbsolutePositions::Learned}) {
    auto lm = lm_of(3, positions);
    torch::NoGradGuard no_grad;
    const auto tokens = tokens_of(2, 30);
    const auto full = lm->forward(tokens);
    EXPECT_TRUE(torch::allclose(train::streaming_logits(*lm, tokens, 30, 0, "test"), full, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(train::streaming_logits(*lm, tokens, 26, 4, "test"), full, 1e-5, 1e-5));
    // Before the cache fills, a smaller window changes nothing.
    const auto windowed = train::streaming_logits(*lm, tokens, 8, 2, "test");
    EXPECT_TRUE(torch::allclose(windowed.narrow(1, 0, 10), full.narrow(1, 0, 10), 1e-5, 1e-5));
    EXPECT_FALSE(torch::allclose(windowed.narrow(1, 10, 20), full.narrow(1, 10, 20), 1e-3, 1e-3))
        << "past it, the evicted tokens are missed";
  }
}

TEST(Streaming, TheSinksAreTheFirstTokensOfTheRow) {
  // Three layers: changing a token that left the window changes nothing unless it is a sink.
  auto lm = lm_of(3, nn::AbsolutePositions::None);
  torch::NoGradGuard no_grad;
  const auto tokens = tokens_of(1, 24);
  auto changed = tokens.clone();
  changed.index_put_({0, 1}, (tokens.index({0, 1}) + 1).remainder(11));  // token 1
  const auto last = [&](const torch::Tensor& t, int64_t sinks) {
    return train::streaming_logits(*lm, t, 6, sinks, "test").select(1, -1);
  };
  // Token 1 left the window long before position 23, and with it every state that saw it.
  EXPECT_TRUE(torch::allclose(last(tokens, 1), last(changed, 1), 1e-6, 1e-6)) << "token 1 is no sink";
  EXPECT_FALSE(torch::allclose(last(tokens, 2), last(changed, 2), 1e-4, 1e-4)) << "token 1 is a sink";
}

TEST(Streaming, RecomputationRunsEachWindowAfreshFromPositionZero) {
  // Three layers and learned absolute positions: every layer's keys, and every position, are those
  // of the window alone, so position t equals the model run on tokens t - W + 1 ... t by itself.
  for (const auto positions : {nn::AbsolutePositions::None, nn::AbsolutePositions::Learned}) {
    auto lm = lm_of(3, positions);
    torch::NoGradGuard no_grad;
    const auto tokens = tokens_of(2, 30);
    const int64_t window = 7;
    const auto recomputed = train::recomputed_window_logits(*lm, tokens, window);  // [2, 30, V]
    ASSERT_EQ(recomputed.sizes(), (std::vector<int64_t>{2, 30, 11}));
    for (int64_t t = 0; t < 30; ++t) {
      const int64_t from = std::max<int64_t>(0, t - window + 1);
      const auto fresh = lm->forward(tokens.narrow(1, from, t - from + 1)).select(1, -1);  // [2, V]
      EXPECT_TRUE(torch::allclose(recomputed.select(1, t), fresh, 1e-5, 1e-5)) << "position " << t;
    }
    // Chunked through the model one window at a time: the same logits.
    EXPECT_TRUE(torch::allclose(train::recomputed_window_logits(*lm, tokens, window, /*max_logits=*/1), recomputed,
                                1e-6, 1e-6));
    // A window that holds every token is the full forward; with three layers, the cache's window
    // (whose kept keys saw the tokens before them) is not the recomputed one.
    EXPECT_TRUE(torch::allclose(train::recomputed_window_logits(*lm, tokens, 30), lm->forward(tokens), 1e-5, 1e-5));
    EXPECT_FALSE(torch::allclose(train::streaming_logits(*lm, tokens, window, 0, "test").narrow(1, window, 30 - window),
                                 recomputed.narrow(1, window, 30 - window), 1e-3, 1e-3));
  }
}

/// A language model whose decoding state is not the framework transformer's.
class OtherLm final : public nn::LanguageModel {
 public:
  torch::Tensor forward(const torch::Tensor& tokens) override { return torch::zeros({tokens.size(0), tokens.size(1), 3}); }
  std::unique_ptr<nn::DecoderState> init_state() override {
    auto s = std::make_unique<nn::DecoderState>();
    s->incremental = true;
    return s;
  }
  torch::Tensor step(const torch::Tensor& tokens, nn::DecoderState&) override { return forward(tokens); }
  int64_t vocab_size() const override { return 3; }
  int64_t max_positions() const override { return 0; }
};

TEST(Streaming, AModelWithoutTheTransformersCacheIsRefusedByName) {
  OtherLm lm;
  try {
    train::streaming_logits(lm, torch::zeros({1, 8}, torch::kLong), 4, 1, "--window: run r.h5");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(testutil::contains(e.what(), "--window: run r.h5")) << e.what();
    EXPECT_TRUE(testutil::contains(e.what(), "KV cache")) << e.what();
  }
}

}  // namespace
}  // namespace train_streaming_test
