// Text generation (train/generate.hpp): the KV cache decodes what recomputation does, greedy is the
// argmax, top-k and top-p keep the tokens they should, and a seed fixes the samples.
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer_lm.hpp>
#include <attnlab/train/generate.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "testing/testing.hpp"

namespace train_generate_test {
namespace {
using namespace attnlab;

nn::TransformerLM small_lm() {
  torch::manual_seed(3);
  return nn::TransformerLM(nn::TransformerOptions(/*vocab=*/13, 16, 32, 2, 2)
                               .norm(nn::NormPlacement::First)
                               .dropout(0.1)
                               .init(nn::TransformerInit::Gpt2)
                               .tie_embeddings(true)
                               .max_len(64),
                           [](const nn::ScorerContext&) { return std::make_shared<nn::DotProductScorerImpl>(); });
}

TEST(Generate, TheCacheDecodesWhatRecomputationDoes) {
  auto lm = small_lm();
  for (const double temperature : {0.0, 1.0, 0.7}) {
    SCOPED_TRACE(temperature);
    train::GenerateOptions o{.tokens = 30, .temperature = temperature, .top_k = 0, .top_p = 1.0, .seed = 5};
    const auto cached = train::generate(*lm, {1, 2, 3}, o, torch::kCPU);
    o.cache = false;
    const auto recomputed = train::generate(*lm, {1, 2, 3}, o, torch::kCPU);
    EXPECT_EQ(cached.ids, recomputed.ids);
    EXPECT_EQ(cached.ids.size(), 33u);
    EXPECT_EQ(cached.prompt_tokens, 3);
    EXPECT_EQ(cached.cache, "kv");
    EXPECT_GT(cached.cache_bytes, 0);
    EXPECT_EQ(recomputed.cache, "none");
  }
  EXPECT_TRUE(lm->is_training()) << "the model's mode is restored";
}

TEST(Generate, GreedyIsTheArgmaxOfTheFullForward) {
  auto lm = small_lm();
  const auto g = train::generate(*lm, {4, 5}, {.tokens = 6, .temperature = 0}, torch::kCPU);
  lm->eval();
  torch::NoGradGuard no_grad;
  for (size_t t = 2; t < g.ids.size(); ++t) {
    const std::vector<int64_t> prefix(g.ids.begin(), g.ids.begin() + static_cast<int64_t>(t));
    const auto logits = lm->forward(torch::tensor(prefix, torch::kLong).reshape({1, -1}));  // [1, t, V]
    EXPECT_EQ(logits[0][t - 1].argmax().item<int64_t>(), g.ids[t]) << "token " << t;
  }
}

TEST(Generate, TheSamplerKeepsWhatTopKAndTopPKeep) {
  // Probabilities 0.5, 0.25, 0.15, 0.1 as logits.
  const auto logits = torch::tensor({0.5, 0.25, 0.15, 0.1}).log();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto draws = [&](train::GenerateOptions o) {
    std::set<int64_t> seen;
    for (int i = 0; i < 400; ++i) seen.insert(train::pick_token(logits, o, gen));
    return seen;
  };
  EXPECT_EQ(draws({.temperature = 1}), (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(draws({.temperature = 1, .top_k = 2}), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(draws({.temperature = 1, .top_k = 1}), (std::set<int64_t>{0}));
  // 0.5 does not reach 0.7; 0.5 + 0.25 does: the nucleus is {0, 1}.
  EXPECT_EQ(draws({.temperature = 1, .top_p = 0.7}), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(draws({.temperature = 1, .top_p = 0.5}), (std::set<int64_t>{0}));
  EXPECT_EQ(draws({.temperature = 1, .top_p = 0.76}), (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(draws({.temperature = 0}), (std::set<int64_t>{0}));
  // A low temperature sharpens: token 0 nearly always.
  int zeros = 0;
  for (int i = 0; i < 400; ++i) zeros += train::pick_token(logits, {.temperature = 0.05}, gen) == 0;
  EXPECT_GT(zeros, 395);
}

TEST(Generate, ASeedFixesTheSamples) {
  auto lm = small_lm();
  const train::GenerateOptions o{.tokens = 20, .temperature = 1, .seed = 11};
  EXPECT_EQ(train::generate(*lm, {1}, o, torch::kCPU).ids, train::generate(*lm, {1}, o, torch::kCPU).ids);
  auto other = o;
  other.seed = 12;
  EXPECT_NE(train::generate(*lm, {1}, o, torch::kCPU).ids, train::generate(*lm, {1}, other, torch::kCPU).ids);
}

}  // namespace
}  // namespace train_generate_test
