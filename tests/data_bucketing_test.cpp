// Length bucketing: a permutation of the examples in full batches, seeded, with less padding
// than random batching; a decoder-only batch (no source) padded to a bucket shape and moved.
#include <attnlab/data/bucketing.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace attnlab;

/// Sentence-like lengths: 3..60 tokens, skewed short (as captions).
std::vector<int64_t> caption_lengths(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::gamma_distribution<double> gamma(4.0, 3.5);
  std::vector<int64_t> out(n);
  for (auto& l : out) l = std::clamp<int64_t>(static_cast<int64_t>(gamma(rng)) + 3, 3, 60);
  return out;
}

void expect_each_index_once(const std::vector<std::vector<int64_t>>& batches, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& b : batches) {
    for (int64_t i : b) {
      ASSERT_TRUE(i >= 0 && i < n) << i;
      ++seen[static_cast<size_t>(i)];
    }
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "index " << i;
}

TEST(Bucketing, EveryIndexOnceInFullBatches) {
  const auto lengths = caption_lengths(29000, 1);
  const auto batches = data::bucket_batches(lengths, {.batch_size = 128, .chunk_batches = 100, .seed = 7});
  expect_each_index_once(batches, 29000);
  ASSERT_EQ(batches.size(), 227u);  // ceil(29000 / 128)
  int short_batches = 0;
  for (const auto& b : batches) {
    EXPECT_LE(b.size(), 128u);
    short_batches += b.size() < 128;
  }
  EXPECT_EQ(short_batches, 1);  // 29000 = 226 * 128 + 72
}

TEST(Bucketing, LessPaddingThanRandomBatches) {
  const auto lengths = caption_lengths(29000, 2);
  const auto bucketed = data::bucket_batches(lengths, {.batch_size = 128, .chunk_batches = 100, .seed = 3});
  const auto random = data::random_batches(29000, 128, 3);
  expect_each_index_once(random, 29000);
  const double waste_bucketed = data::padding_fraction(lengths, bucketed);
  const double waste_random = data::padding_fraction(lengths, random);
  EXPECT_LT(waste_bucketed, 0.05);
  EXPECT_GT(waste_random, 0.4);
  EXPECT_LT(waste_bucketed, waste_random / 5);
  // Smaller chunks still help, less.
  const auto small_chunks = data::bucket_batches(lengths, {.batch_size = 128, .chunk_batches = 2, .seed = 3});
  EXPECT_LT(data::padding_fraction(lengths, small_chunks), waste_random);
  EXPECT_GT(data::padding_fraction(lengths, small_chunks), waste_bucketed);
}

TEST(Bucketing, SeededAndShuffled) {
  const auto lengths = caption_lengths(5000, 3);
  const auto a = data::bucket_batches(lengths, {.batch_size = 64, .chunk_batches = 10, .seed = 1});
  const auto b = data::bucket_batches(lengths, {.batch_size = 64, .chunk_batches = 10, .seed = 1});
  const auto c = data::bucket_batches(lengths, {.batch_size = 64, .chunk_batches = 10, .seed = 2});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Batch order is not sorted by length (the batches themselves are shuffled).
  std::vector<int64_t> firsts;
  for (const auto& batch : a) firsts.push_back(lengths[static_cast<size_t>(batch.front())]);
  EXPECT_FALSE(std::is_sorted(firsts.begin(), firsts.end()));
  EXPECT_EQ(data::seeded_permutation(10, 5), data::seeded_permutation(10, 5));
  EXPECT_NE(data::seeded_permutation(100, 5), data::seeded_permutation(100, 6));
}

TEST(Bucketing, EdgeCases) {
  EXPECT_TRUE(data::bucket_batches({}, {.batch_size = 4}).empty());
  const auto one = data::bucket_batches({5, 1, 3}, {.batch_size = 8});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], (std::vector<int64_t>{1, 2, 0}));  // sorted by length within the chunk
  EXPECT_DOUBLE_EQ(data::padding_fraction({2, 2}, {{0, 1}}), 0.0);
  EXPECT_DOUBLE_EQ(data::padding_fraction({1, 3}, {{0, 1}}), 2.0 / 6.0);
  EXPECT_THROW(data::bucket_batches({1, 2}, {.batch_size = 0}), DataError);
  EXPECT_THROW(data::bucket_batches({1, 2}, {.batch_size = 2, .chunk_batches = 0}), DataError);
  EXPECT_THROW(data::bucket_batches({1, -2}, {.batch_size = 2}), DataError);
  EXPECT_THROW(data::random_batches(3, 0, 0), DataError);
}

TEST(Bucketing, DecoderOnlyBatchPadsItsTargetSideAlone) {
  // Batch's decoder-only layout: no source; tgt_out the next token of tgt_in, every label scored.
  data::Batch b;
  b.tgt_in = torch::tensor({{5, 6, 7}, {8, 9, 4}});                 // [2, 3]
  b.tgt_out = torch::tensor({{6, 7, 8}, {9, 4, 5}});                // [2, 3]
  b.tgt_valid_lens = torch::tensor({3, 3});                         // [2]
  EXPECT_EQ(b.size(), 2);
  const auto moved = b.to(torch::kCPU);
  EXPECT_FALSE(moved.src.defined());
  EXPECT_FALSE(moved.src_valid_lens.defined());
  EXPECT_TRUE(moved.tgt_in.is_same(b.tgt_in));

  const auto p = data::pad_to_bucket(b, 4, 4, 0);  // pad 0
  EXPECT_FALSE(p.src.defined());
  EXPECT_FALSE(p.src_valid_lens.defined());
  EXPECT_EQ(p.size(), 4);
  EXPECT_EQ(p.tgt_in.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(p.tgt_out.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_TRUE(torch::equal(p.tgt_in.narrow(0, 0, 2).narrow(1, 0, 3), b.tgt_in));
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(0, 0, 2).narrow(1, 0, 3), b.tgt_out));
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(1, 3, 1), torch::zeros({4, 1}, torch::kLong)));  // unscored
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(0, 2, 2), torch::zeros({2, 4}, torch::kLong)));
  EXPECT_TRUE(torch::equal(p.tgt_valid_lens, torch::tensor({3, 3, 0, 0})));
  EXPECT_TRUE(data::pad_to_bucket(b, 2, 3, 0).tgt_in.is_same(b.tgt_in));  // nothing to add: b itself

  data::Batch no_target;  // neither side: not a token batch
  EXPECT_THROW(data::pad_to_bucket(no_target, 4, 4, 0), DataError);
}

}  // namespace
