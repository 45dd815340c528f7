// The attention recorder: entries with module, layer, heads and sides; the active recorder and its
// scope; steps appended by query position (incremental decoding); attention modules writing to it.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/recorder.hpp>

#include "testing/testing.hpp"

#include <memory>
#include <string>
#include <vector>

namespace attnlab::nn {
namespace {

using attnlab::testutil::SeededTest;
using Sizes = std::vector<int64_t>;

class Recorder : public SeededTest {};

/// The message of the c10::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

const RecordAs kSelf0{kEncoderSelf, 0, Side::Source, Side::Source};
const RecordAs kSelf1{kEncoderSelf, 1, Side::Source, Side::Source};
const RecordAs kCross0{kDecoderCross, 0, Side::Target, Side::Source};

TEST_F(Recorder, SideNamesAreTheResultsFileWords) {
  EXPECT_STREQ(side_name(Side::Source), "source");
  EXPECT_STREQ(side_name(Side::Target), "target");
  EXPECT_STREQ(side_name(Side::Queries), "queries");
  EXPECT_STREQ(side_name(Side::Keys), "keys");
}

TEST_F(Recorder, EntriesCarryModuleLayersHeadsAndSides) {
  AttentionRecorder r;
  EXPECT_TRUE(r.empty());
  auto l1 = torch::rand({2, 4, 5, 5}), l0 = torch::rand({2, 4, 5, 5}), cross = torch::rand({2, 4, 3, 5});
  r.record(kSelf1, l1);  // layers out of order: read back ascending
  r.record(kCross0, cross);
  r.record(kSelf0, l0);
  EXPECT_FALSE(r.empty());
  auto modules = r.modules();
  ASSERT_EQ(modules.size(), 2u);  // first-recorded order
  EXPECT_EQ(modules[0].module, kEncoderSelf);
  EXPECT_EQ(modules[0].queries, Side::Source);
  EXPECT_EQ(modules[0].keys, Side::Source);
  EXPECT_EQ(modules[0].layers, (Sizes{0, 1}));
  ASSERT_EQ(modules[0].weights.sizes(), (Sizes{2, 2, 4, 5, 5}));  // [layers, B, heads, Q, K]
  EXPECT_TRUE(torch::equal(modules[0].weights[0], l0));
  EXPECT_TRUE(torch::equal(modules[0].weights[1], l1));
  EXPECT_EQ(modules[1].module, kDecoderCross);
  EXPECT_EQ(modules[1].queries, Side::Target);
  EXPECT_EQ(modules[1].keys, Side::Source);
  EXPECT_TRUE(torch::equal(r.module(kDecoderCross).weights, cross.unsqueeze(0)));
  r.clear();
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.modules().empty());
}

TEST_F(Recorder, KeepsOnlyLayersItWasGiven) {
  AttentionRecorder r;
  r.record({"last_only", 5, Side::Target, Side::Source}, torch::rand({1, 2, 3, 4}));
  auto m = r.module("last_only");
  EXPECT_EQ(m.layers, (Sizes{5}));
  EXPECT_EQ(m.weights.sizes(), (Sizes{1, 1, 2, 3, 4}));
}

TEST_F(Recorder, RecordedWeightsAreDetached) {
  AttentionRecorder r;
  auto w = torch::rand({1, 1, 2, 2}, torch::requires_grad());
  r.record(kSelf0, w * 2);
  EXPECT_FALSE(r.module(kEncoderSelf).weights.requires_grad());
}

TEST_F(Recorder, StepsAppendByQueryPositionAndNarrowKeysAreZeroFilled) {
  // Decoder self-attention one step at a time: step t has one query row and t + 1 keys.
  AttentionRecorder r;
  const RecordAs self{kDecoderSelf, 0, Side::Target, Side::Target};
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < 3; ++t) {
    steps.push_back(torch::rand({2, 4, 1, t + 1}));  // [B, heads, 1, t + 1]
    r.record(self, steps.back(), /*query_offset=*/t);
  }
  auto w = r.module(kDecoderSelf).weights[0];  // [B, heads, 3, 3]
  ASSERT_EQ(w.sizes(), (Sizes{2, 4, 3, 3}));
  for (int64_t t = 0; t < 3; ++t) {
    EXPECT_TRUE(torch::equal(w.narrow(2, t, 1).narrow(3, 0, t + 1), steps[t])) << "step " << t;
    EXPECT_TRUE(w.narrow(2, t, 1).narrow(3, t + 1, 2 - t).eq(0).all().item<bool>()) << "step " << t;
  }
  // Two rows at once (a forward of two steps) append as well.
  r.record(self, torch::rand({2, 4, 2, 5}), 3);
  EXPECT_EQ(r.module(kDecoderSelf).weights.sizes(), (Sizes{1, 2, 4, 5, 5}));
}

TEST_F(Recorder, OffsetZeroStartsAfreshAndAnEarlierOffsetReplacesTheRowsFromThere) {
  AttentionRecorder r;
  auto a = torch::rand({1, 1, 2, 3}), b = torch::rand({1, 1, 1, 3}), c = torch::rand({1, 1, 1, 3});
  r.record(kCross0, a);
  r.record(kCross0, b, 2);  // rows 0, 1 from a; row 2 from b
  r.record(kCross0, c, 1);  // row 0 from a; row 1 from c; b dropped
  auto w = r.module(kDecoderCross).weights[0];
  ASSERT_EQ(w.sizes(), (Sizes{1, 1, 2, 3}));
  EXPECT_TRUE(torch::equal(w.narrow(2, 0, 1), a.narrow(2, 0, 1)));
  EXPECT_TRUE(torch::equal(w.narrow(2, 1, 1), c));
  // A new forward over the whole sequence, even of another batch size, replaces everything.
  auto fresh = torch::rand({3, 1, 4, 3});
  r.record(kCross0, fresh);
  EXPECT_TRUE(torch::equal(r.module(kDecoderCross).weights[0], fresh));
  // Rows past the recorded ones (recording began mid-sequence) do not continue them: afresh too.
  auto later = torch::rand({3, 1, 1, 3});
  r.record(kCross0, later, 9);
  EXPECT_TRUE(torch::equal(r.module(kDecoderCross).weights[0], later));
}

TEST_F(Recorder, RefusesWhatCannotBeOneMap) {
  AttentionRecorder r;
  r.record(kCross0, torch::rand({2, 4, 1, 3}));
  auto batch = error_of([&] { r.record(kCross0, torch::rand({3, 4, 1, 3}), 1); });
  EXPECT_TRUE(testutil::contains(batch, "a step of 3 sequences and 4 heads follows steps of 2 and 4")) << batch;
  auto sides = error_of([&] { r.record({kDecoderCross, 1, Side::Target, Side::Target}, torch::rand({2, 4, 1, 3})); });
  EXPECT_TRUE(
      testutil::contains(sides, "decoder_cross layer 1 records target x target but its layer 0 target x source"))
      << sides;
  auto shape = error_of([&] { r.record(kSelf0, torch::rand({2, 3, 3})); });
  EXPECT_TRUE(testutil::contains(shape, "expected weights [B, heads, Q, K], found [2, 3, 3]")) << shape;
  auto missing = error_of([&] { r.module("encoder_self"); });
  EXPECT_TRUE(testutil::contains(missing, "no attention recorded for module 'encoder_self' (recorded: decoder_cross)"))
      << missing;
  r.record(kSelf0, torch::rand({2, 4, 5, 5}));
  r.record(kSelf1, torch::rand({2, 4, 4, 5}));
  auto layers = error_of([&] { r.modules(); });
  EXPECT_TRUE(testutil::contains(layers, "encoder_self layer 1 recorded [B, heads, Q] [2, 4, 4] but layer 0 [2, 4, 5]"))
      << layers;
}

TEST_F(Recorder, ScopesMakeARecorderActiveAndRestoreThePreviousOne) {
  EXPECT_EQ(active_recorder(), nullptr);  // training: nothing records
  AttentionRecorder outer, inner;
  {
    RecordingScope a(&outer);
    EXPECT_EQ(active_recorder(), &outer);
    {
      RecordingScope b(&inner);
      EXPECT_EQ(active_recorder(), &inner);
      RecordingScope paused(nullptr);
      EXPECT_EQ(active_recorder(), nullptr);
    }
    EXPECT_EQ(active_recorder(), &outer);
  }
  EXPECT_EQ(active_recorder(), nullptr);
}

/// Dot products, counting which path attention took.
class CountingScorer final : public Scorer {
 public:
  torch::Tensor score(const torch::Tensor& q, const torch::Tensor& k, const Positions& at) override {
    ++scored;
    return dot_.score(q, k, at);
  }
  std::optional<torch::Tensor> attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& valid_lens, const Positions& at, double dropout,
                                      bool training) override {
    ++fused;
    return dot_.attend(q, k, v, valid_lens, at, dropout, training);
  }
  int scored = 0, fused = 0;

 private:
  DotProductScorerImpl dot_;
};

TEST_F(Recorder, AttentionTakesItsFusedPathUnlessARecorderIsActive) {
  auto scorer = std::make_shared<CountingScorer>();
  Attention attention(scorer, 0.0, RecordAs{.module = "pooling"});
  auto q = torch::randn({2, 3, 4}), kv = torch::randn({2, 5, 4});
  auto plain = attention->forward(q, kv, kv, torch::tensor({5, 2}));
  EXPECT_EQ(scorer->fused, 1);
  EXPECT_EQ(scorer->scored, 0);
  AttentionRecorder r;
  torch::Tensor recorded;
  {
    RecordingScope scope(&r);
    recorded = attention->forward(q, kv, kv, torch::tensor({5, 2}));
  }
  EXPECT_EQ(scorer->fused, 1);
  EXPECT_EQ(scorer->scored, 1);
  EXPECT_ALLCLOSE(recorded, plain, 1e-5, 1e-6);
  auto m = r.module("pooling");
  EXPECT_EQ(m.queries, Side::Queries);  // RecordAs's defaults
  EXPECT_EQ(m.keys, Side::Keys);
  EXPECT_EQ(m.layers, (Sizes{0}));
  ASSERT_EQ(m.weights.sizes(), (Sizes{1, 2, 1, 3, 5}));  // [layers, B, heads 1, Q, K]
  EXPECT_ALLCLOSE(m.weights.sum(-1), torch::ones({1, 2, 1, 3}));
  EXPECT_TRUE(m.weights[0][1].narrow(-1, 2, 3).eq(0).all().item<bool>());  // past valid length 2
  attention->forward(q, kv, kv);  // the scope is gone: nothing more is recorded
  EXPECT_EQ(scorer->fused, 2);
  EXPECT_EQ(r.module("pooling").weights.size(1), 2);
}

TEST_F(Recorder, MultiHeadAttentionRecordsPerHeadWeightsAsItsOptionsSay) {
  const RecordAs as{kDecoderCross, 3, Side::Target, Side::Source};
  MultiHeadAttention mha(MultiHeadAttentionOptions(8, 2).record_as(as), std::make_shared<DotProductScorerImpl>());
  auto q = torch::randn({3, 4, 8}), kv = torch::randn({3, 6, 8});
  const auto lens = torch::tensor({6, 2, 4});
  AttentionRecorder r;
  RecordingScope scope(&r);
  mha->forward(q, kv, kv, lens);
  auto m = r.module(kDecoderCross);
  EXPECT_EQ(m.layers, (Sizes{3}));
  EXPECT_EQ(m.queries, Side::Target);
  EXPECT_EQ(m.keys, Side::Source);
  ASSERT_EQ(m.weights.sizes(), (Sizes{1, 3, 2, 4, 6}));                     // [layers, B, heads, Q, K]
  EXPECT_TRUE(m.weights[0][1].narrow(-1, 2, 4).eq(0).all().item<bool>());   // sequence 1: 2 valid keys
  EXPECT_FALSE(m.weights[0][2].narrow(-1, 2, 2).eq(0).all().item<bool>());  // sequence 2: 4
}

}  // namespace
}  // namespace attnlab::nn
