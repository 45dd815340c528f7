// The per-step mask memo (framework/src/nn/mask_memo.hpp): the layers of a stack share one mask,
// a changed lengths tensor, another shape or an inference tensor gets one made afresh, and the
// outputs equal those with masks made afresh; a decoder's blocks share its causal masks.
#include "nn/mask_memo.hpp"

#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "testing/testing.hpp"

#include <torch/utils.h>

#include <functional>
#include <vector>

namespace attnlab::nn {
namespace {

class MaskMemo : public testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    memo::reset();
  }
};

/// The masked softmax with its mask made here.
torch::Tensor fresh_masked_softmax(const torch::Tensor& scores, const torch::Tensor& lens) {
  const auto keep = valid_mask(scores.size(0), scores.size(1), scores.size(2), lens);
  return torch::softmax(scores.masked_fill(keep.logical_not(), -1e6), -1);
}

TEST_F(MaskMemo, LayersOfAStackShareOneMaskPerLengthsTensor) {
  // Three multi-head attention layers over the same lengths, as an encoder's: the per-head repeat
  // and SDPA's masks are made by the first and found by the other two.
  std::vector<MultiHeadAttention> layers;
  for (int i = 0; i < 3; ++i) {
    layers.emplace_back(MultiHeadAttentionOptions(8, 2), std::make_shared<DotProductScorerImpl>());
    layers.back()->eval();
  }
  const auto lens = torch::tensor({3, 0, 5});  // a row with nothing valid too
  const auto stack = [&](const std::function<torch::Tensor()>& lengths) {
    torch::manual_seed(7);
    auto x = torch::randn({3, 5, 8});
    for (auto& layer : layers) x = layer->forward(x, x, x, lengths());
    return x;
  };
  const auto remembered = stack([&] { return lens; });
  EXPECT_EQ(memo::stats().misses, 2);
  EXPECT_EQ(memo::stats().hits, 4);
  // A new tensor of the same values each call: nothing found, every mask made afresh.
  memo::reset();
  const auto fresh = stack([&] { return lens.clone(); });
  EXPECT_EQ(memo::stats().hits, 0);
  EXPECT_TRUE(torch::equal(remembered, fresh));
}

TEST_F(MaskMemo, ALengthsTensorChangedInPlaceGetsAFreshMask) {
  const auto scores = torch::randn({2, 3, 6});
  auto lens = torch::tensor({2, 6});
  EXPECT_TRUE(torch::equal(masked_softmax(scores, lens), fresh_masked_softmax(scores, lens)));
  lens[0] = 4;  // same tensor, new version
  EXPECT_TRUE(torch::equal(masked_softmax(scores, lens), fresh_masked_softmax(scores, lens)));
  EXPECT_EQ(memo::stats().misses, 2);
  EXPECT_EQ(memo::stats().hits, 0);
  EXPECT_TRUE(torch::equal(masked_softmax(scores, lens), fresh_masked_softmax(scores, lens)));
  EXPECT_EQ(memo::stats().hits, 1);
}

TEST_F(MaskMemo, TheShapeIsPartOfTheKey) {
  const auto lens = torch::tensor({1, 3});
  for (int64_t keys : {4, 7, 4}) {
    const auto scores = torch::randn({2, 3, keys});
    EXPECT_TRUE(torch::equal(masked_softmax(scores, lens), fresh_masked_softmax(scores, lens))) << keys;
  }
  EXPECT_EQ(memo::stats().misses, 2);
  EXPECT_EQ(memo::stats().hits, 1);
  // [B, Q] lengths too.
  const auto per_query = torch::tensor({{1, 2, 3}, {3, 0, 2}});
  const auto scores = torch::randn({2, 3, 4});
  EXPECT_TRUE(torch::equal(masked_softmax(scores, per_query), fresh_masked_softmax(scores, per_query)));
  EXPECT_TRUE(torch::equal(masked_softmax(scores, per_query), fresh_masked_softmax(scores, per_query)));
  EXPECT_EQ(memo::stats().hits, 2);
}

TEST_F(MaskMemo, ADecodersBlocksShareTheCausalMasks) {
  // The decoder's blocks get one causal lengths tensor a step, so what is derived from it is made
  // once whatever the number of blocks: the memo's misses do not grow with the blocks.
  const ScorerFactory dot = [](const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); };
  const auto misses = [&](int64_t blocks) {
    auto options = TransformerOptions(11, 8, 16, 2, blocks).dropout(0.0);
    TransformerEncoder encoder(options, dot);
    TransformerDecoder decoder(options, dot);
    const auto src = torch::randint(11, {3, 5}), tgt = torch::randint(11, {3, 4});
    const auto enc = encoder->forward(src, torch::tensor({5, 2, 4}));
    memo::reset();
    for (int step = 0; step < 2; ++step) {  // a second step of the same shape finds the first's
      auto state = decoder->init_state(enc, /*incremental=*/false);
      decoder->forward(tgt, *state);
    }
    return memo::stats().misses;
  };
  EXPECT_EQ(misses(3), misses(1));
  EXPECT_GT(misses(1), 0);
}

TEST_F(MaskMemo, InferenceTensorsAreNotRemembered) {
  // They carry no version, so a change in place could not be told: made afresh every time.
  torch::InferenceMode guard;
  const auto lens = torch::tensor({2, 4});
  const auto scores = torch::randn({2, 1, 4});
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(torch::equal(masked_softmax(scores, lens), fresh_masked_softmax(scores, lens)));
  EXPECT_EQ(memo::stats().hits + memo::stats().misses, 0);
}

}  // namespace
}  // namespace attnlab::nn
