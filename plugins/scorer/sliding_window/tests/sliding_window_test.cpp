// The sliding_window scorer plugin (local attention) as the runner loads it: a window that covers
// the sequence is plain scaled dot-product attention, keys beyond the window get weight 0, the
// blocked path (which never builds the [Q, K] scores) equals the materialised one, step-by-step
// decoding with the KV cache equals the full causal forward, bad uses are one config error each,
// and the real runner trains with it and records its attention.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include "testing/golden.hpp"
#include "testing/position_scorers.hpp"
#include "testing/testing.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;
using testutil::message_of;
using testutil::ScorerExperimentRun;
using Role = nn::ScorerContext::Role;

class SlidingWindow : public testutil::ScorerPluginTest {};

TEST_F(SlidingWindow, AWindowCoveringTheSequenceIsScaledDotProductAttention) {
  auto q = torch::randn({6, 5, 8}), k = torch::randn({6, 7, 8}), v = torch::randn({6, 7, 3});
  auto local = scorer("{plugin: sliding_window, window: 7}", context(3, 8));
  auto dot = std::make_shared<nn::DotProductScorerImpl>();
  EXPECT_TRUE(torch::equal(local->score(q, k, {0, 0}), dot->score(q, k, {0, 0})));
  nn::Attention a(local, 0.0), b(dot, 0.0);
  const auto lens = torch::tensor({7, 3, 5, 1, 2, 6});
  EXPECT_ALLCLOSE(a->forward(q, k, v, lens), b->forward(q, k, v, lens), 1e-6, 1e-6);
}

TEST_F(SlidingWindow, KeysBeyondTheWindowGetZeroWeight) {
  for (const nn::Positions at : {nn::Positions{0, 0}, nn::Positions{3, 1}}) {
    auto local = scorer("{plugin: sliding_window, window: 1}", context(2, 4));
    nn::Attention attention(local, 0.0);
    nn::AttentionRecorder recorder;
    nn::RecordingScope scope(&recorder);
    attention->forward(torch::randn({2, 6, 4}), torch::randn({2, 8, 4}), torch::randn({2, 8, 4}), {}, at);
    auto w = recorder.module("attention").weights[0];  // [2, 1, 6, 8]
    EXPECT_ALLCLOSE(w.sum(-1), torch::ones({2, 1, 6}), 1e-5, 1e-5);
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        const auto distance = std::abs((at.query_offset + i) - (at.key_offset + j));
        const float weight = w.select(2, i).select(-1, j).abs().max().item<float>();
        if (distance > 1) {
          EXPECT_EQ(weight, 0.0f) << "query " << i << " key " << j;
        } else {
          EXPECT_GT(weight, 0.0f) << "query " << i << " key " << j;
        }
      }
    }
  }
}

/// Self-attention over 40 positions with window 3: `blocked` (blocks of 7 queries, or automatic)
/// against the materialised path (recording), outputs and input gradients on the rows that are not
/// padding, with key lengths per sequence and with a causal decoder's lengths per query.
void expect_blocks_equal_full(const std::shared_ptr<nn::Scorer>& blocked, int64_t length) {
  const auto lens = torch::tensor(std::vector<int64_t>{length, length - 9, 5});
  const auto causal = torch::arange(1, length + 1).unsqueeze(0).expand({3, length});
  for (const auto& valid : {torch::Tensor(), lens, torch::Tensor(causal)}) {
    nn::Attention attention(blocked, 0.0);
    attention->eval();
    auto q = torch::randn({3, length, 8}, torch::requires_grad()), k = torch::randn({3, length, 8}, torch::requires_grad());
    auto v = torch::randn({3, length, 5}, torch::requires_grad());
    // The rows a loss sees: every query of a sequence up to its length.
    auto real = valid.defined() && valid.dim() == 1
                    ? (torch::arange(length).unsqueeze(0) < lens.unsqueeze(1)).unsqueeze(-1).to(torch::kFloat)
                    : torch::ones({3, length, 1});
    auto out = attention->forward(q, k, v, valid) * real;
    auto g = torch::autograd::grad({(out * out).sum()}, {q, k, v});
    nn::AttentionRecorder recorder;
    nn::RecordingScope scope(&recorder);
    auto full = attention->forward(q, k, v, valid) * real;
    auto h = torch::autograd::grad({(full * full).sum()}, {q, k, v});
    EXPECT_ALLCLOSE(out, full, 1e-5, 1e-5);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_ALLCLOSE(g[i], h[i], 1e-4, 1e-5);
  }
}

TEST_F(SlidingWindow, BlocksEqualTheMaterialisedPath) {
  expect_blocks_equal_full(scorer("{plugin: sliding_window, window: 3, block: 7}", context(1, 8)), 40);
  // Automatic: 160 keys and more than 4 windows of 7.
  expect_blocks_equal_full(scorer("{plugin: sliding_window, window: 3}", context(1, 8)), 160);
}

TEST_F(SlidingWindow, StepByStepDecodingEqualsTheFullCausalForward) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 2, ";
  auto encoder = registry.create<nn::Encoder>(yaml(model + "attention: {scorer: {plugin: sliding_window, window: 1}}}"), ctx);
  for (const char* block : {"0", "1"}) {
    SCOPED_TRACE(std::string("block ") + block);
    auto decoder = registry.create<nn::Decoder>(
        yaml(model + "attention: {self_scorer: {plugin: sliding_window, window: 2, block: " + block +
             "}, cross_scorer: dot_product}}"),
        ctx);
    testutil::expect_incremental_equals_full(*encoder, *decoder);
  }
  // The window counts positions: each step must stand at its own.
  nn::ScorerFactory scorers = [&](const nn::ScorerContext& c) {
    return scorer(c.role == Role::Self ? "{plugin: sliding_window, window: 1}" : "dot_product", c);
  };
  EXPECT_EQ(testutil::block_steps_equal_full(scorers), std::make_pair(true, false));
}

TEST_F(SlidingWindow, RefusesCrossAttentionAndBadOptions) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, num_heads: 4, num_blks: 1, attention: ";
  auto cross = message_of<ConfigError>(
      [&] { registry.create<nn::Decoder>(yaml(model + "{scorer: {plugin: sliding_window, window: 2}}}"), ctx); });
  EXPECT_NE(cross.find("test.yaml:1:"), std::string::npos) << cross;
  EXPECT_NE(cross.find("sliding_window"), std::string::npos) << cross;
  EXPECT_NE(cross.find("decoder 'transformer' at 'x'"), std::string::npos) << cross;
  EXPECT_NE(cross.find("uses it for cross-attention"), std::string::npos) << cross;
  EXPECT_NE(cross.find("`attention.cross_scorer: dot_product`"), std::string::npos) << cross;
  auto negative = message_of<ConfigError>([&] { scorer("{plugin: sliding_window, window: -1}", context(2, 4)); });
  EXPECT_NE(negative.find("window"), std::string::npos) << negative;
  auto unknown = message_of<ConfigError>([&] { scorer("{plugin: sliding_window, windw: 3}", context(2, 4)); });
  EXPECT_NE(unknown.find("windw"), std::string::npos) << unknown;
}

TEST_F(ScorerExperimentRun, SlidingWindowTrainsTheFraEngTransformerAndRecordsItsAttention) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(expect_self_attention_run("transformer_fra_eng_d2l017_sliding_window.yaml", "sliding_window"));
  // Window 1 in the encoder: no source token attends to one two or more positions away.
  const auto att = testutil::read_attention(rd, "i'm home .", "encoder_self");
  const auto& a = att.weights;  // [2, 4, Q, K]
  int64_t n = 0;                // the sentence's tokens and <eos>; the padding's rows are not the model's business
  for (const auto& t : att.query_tokens) n += t != "<pad>";
  ASSERT_GE(n, 4);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (std::abs(i - j) > 1) {
        EXPECT_EQ(a.select(2, i).select(-1, j).abs().max().item<float>(), 0.0f) << i << " " << j;
      }
    }
  }
}

}  // namespace
