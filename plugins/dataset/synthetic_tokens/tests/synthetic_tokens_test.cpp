// The synthetic_tokens dataset plugin, loaded from its built library as the runner loads it: per
// split length ranges (train and val in [min_len, max_len], test in [test_min_len, test_max_len]),
// the sort task, bad ranges as one config error at the option's place, and the default options
// drawing exactly the data the plugin drew before these options existed.
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
using data::Split;

class SyntheticTokensTest : public testutil::PluginFileTest {
 protected:
  /// The dataset `options` ("vocab_size: 16, num_steps: 8") configure, prepared.
  static std::shared_ptr<data::Dataset> make(const std::string& options) {
    auto d = create<data::Dataset>("dataset", "plugin: synthetic_tokens" + (options.empty() ? "" : ", " + options));
    d->prepare("");
    return d;
  }
  /// The ConfigError's message that `options` give (a failed test when they give none).
  static std::string config_error(const std::string& options) {
    try {
      make(options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected a ConfigError for " << options;
    return "";
  }
  /// A split's tensors in stored order: [N, T] sources, targets out, targets in; [N] lengths.
  static data::Batch all(const data::Dataset& d, Split split) {
    auto bs = d.batches(split, false, 0);
    std::vector<torch::Tensor> src, lens, out, in, tlens;
    for (const auto& b : bs) {
      src.push_back(b.src);
      lens.push_back(b.src_valid_lens);
      out.push_back(b.tgt_out);
      in.push_back(b.tgt_in);
      tlens.push_back(b.tgt_valid_lens);
    }
    return {torch::cat(src), torch::cat(lens), torch::cat(in), torch::cat(out), torch::cat(tlens)};
  }

};

/// The plugin's make() as it was at commit e88f9ad, before max_len and the test range existed
/// (lengths drawn in [min_len, num_steps - 1] for every split), kept to check that the default
/// options still draw the same data. Returns [N, T] sources and targets out.
std::pair<torch::Tensor, torch::Tensor> legacy_make(int64_t n, uint64_t seed, int64_t vocab_size, int64_t num_steps,
                                                    int64_t min_len, const std::string& task) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t pad = 2, eos = 1;
  auto words = torch::randint(4, vocab_size, {n, num_steps}, gen, torch::kLong);  // [N, T]
  auto other = torch::randint(4, vocab_size, {n, num_steps}, gen, torch::kLong);  // [N, T]
  auto lens = torch::randint(min_len, num_steps, {n}, gen, torch::kLong);         // [N] words
  auto src = torch::full({n, num_steps}, pad, torch::kLong), out = torch::full({n, num_steps}, pad, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lens[i].item<int64_t>();
    for (int64_t t = 0; t < len; ++t) {
      src[i][t] = words[i][t];
      out[i][t] = task == "copy" ? words[i][t] : task == "reverse" ? words[i][len - 1 - t] : other[i][t];
    }
    src[i][len] = eos;
    out[i][len] = eos;
  }
  return {src, out};
}

TEST_F(SyntheticTokensTest, DefaultOptionsDrawTheDataOfBefore) {
  struct Case {
    std::string options;
    int64_t vocab_size, num_steps, min_len, sizes[3];
  };
  for (const std::string task : {"copy", "reverse", "random"}) {
    for (const Case& c : {Case{"", 29, 11, 1, {96, 24, 24}},
                          Case{"vocab_size: 16, num_steps: 8, num_train: 1024, num_val: 64, num_test: 48, seed: 3",
                               16,
                               8,
                               1,
                               {1024, 64, 48}},
                          Case{"num_steps: 20, min_len: 5", 29, 20, 5, {96, 24, 24}}}) {
      const auto options = c.options + (c.options.empty() ? "" : ", ") + "task: " + task;
      const auto d = make(options);
      const uint64_t seed = c.options.find("seed: 3") != std::string::npos ? 3 : 0;
      for (int s = 0; s < 3; ++s) {
        const auto [src, out] = legacy_make(c.sizes[s], seed * 3 + s, c.vocab_size, c.num_steps, c.min_len, task);
        const auto got = all(*d, static_cast<Split>(s));
        EXPECT_TRUE(got.src.equal(src)) << options << " split " << s;
        EXPECT_TRUE(got.tgt_out.equal(out)) << options << " split " << s;
      }
    }
  }
}

TEST_F(SyntheticTokensTest, DefaultTestSplitIsTheOneOfBefore) {
  // Printed by `runner eval --split test` (greedy) on experiments/tests/tiny_synthetic.yaml
  // (vocab_size 16, num_steps 8, seed 0) with the plugin of commit e88f9ad: /eval/test/sources
  // and /eval/test/references, first three.
  const std::vector<std::string> sources{"t04", "t12 t07", "t11 t15 t06 t04 t08 t04 t05"};
  const std::vector<std::vector<std::string>> targets{{"t04", "t12 t07", "t11 t15 t06 t04 t08 t04 t05"},   // copy
                                                      {"t04", "t07 t12", "t05 t04 t08 t04 t06 t15 t11"},   // reverse
                                                      {"t04", "t15 t05", "t15 t08 t08 t12 t14 t04 t05"}};  // random
  const char* tasks[] = {"copy", "reverse", "random"};
  for (int k = 0; k < 3; ++k) {
    const auto d = make(std::string("vocab_size: 16, num_steps: 8, num_test: 48, task: ") + tasks[k]);
    auto src = d->raw_sources(Split::Test), tgt = d->raw_targets(Split::Test);
    ASSERT_EQ(src.size(), 48u);
    EXPECT_EQ(std::vector<std::string>(src.begin(), src.begin() + 3), sources) << tasks[k];
    EXPECT_EQ(std::vector<std::string>(tgt.begin(), tgt.begin() + 3), targets[k]) << tasks[k];
  }
}

TEST_F(SyntheticTokensTest, EachSplitDrawsLengthsInItsOwnRange) {
  const auto d = make(
      "num_steps: 33, min_len: 2, max_len: 16, test_min_len: 17, test_max_len: 32, num_train: 2000, "
      "num_val: 300, num_test: 600");
  EXPECT_EQ(d->info().num_steps, 33);
  for (auto [split, lo, hi] : {std::tuple{Split::Train, 2, 16}, {Split::Val, 2, 16}, {Split::Test, 17, 32}}) {
    const auto b = all(*d, split);
    const auto words = b.src_valid_lens - 1;  // [N] without <eos>
    EXPECT_EQ(words.min().item<int64_t>(), lo) << static_cast<int>(split);
    EXPECT_EQ(words.max().item<int64_t>(), hi) << static_cast<int>(split);
    EXPECT_TRUE(b.tgt_valid_lens.equal(b.src_valid_lens));
    // <eos> right after the words, padding after it.
    const auto steps = torch::arange(33).unsqueeze(0);  // [1, T]
    EXPECT_TRUE(b.src.gather(1, words.unsqueeze(1)).eq(1).all().item<bool>());
    EXPECT_TRUE(b.src.masked_select(steps > words.unsqueeze(1)).eq(2).all().item<bool>());
    EXPECT_TRUE(b.src.masked_select(steps < words.unsqueeze(1)).ge(4).all().item<bool>());
  }
  // Only test_max_len: the test range starts at min_len.
  const auto t = all(*make("num_steps: 12, max_len: 4, test_max_len: 11, num_test: 400"), Split::Test);
  EXPECT_EQ(t.src_valid_lens.min().item<int64_t>(), 2);  // 1 word + <eos>
  EXPECT_EQ(t.src_valid_lens.max().item<int64_t>(), 12);
}

TEST_F(SyntheticTokensTest, SortTargetsAreTheSourceSortedById) {
  const auto d = make("num_steps: 20, task: sort, test_min_len: 10, test_max_len: 19");
  for (auto split : {Split::Train, Split::Test}) {
    const auto b = all(*d, split);
    for (int64_t i = 0; i < b.src.size(0); ++i) {
      const int64_t len = b.src_valid_lens[i].item<int64_t>() - 1;
      auto want = std::get<0>(b.src[i].narrow(0, 0, len).sort());  // [len]
      EXPECT_TRUE(b.tgt_out[i].narrow(0, 0, len).equal(want)) << "row " << i;
      EXPECT_EQ(b.tgt_out[i][len].item<int64_t>(), 1);  // <eos>
      EXPECT_EQ(b.tgt_in[i][0].item<int64_t>(), 0);     // <bos>, then the target shifted
      EXPECT_TRUE(b.tgt_in[i].narrow(0, 1, len).equal(want));
    }
  }
  // The strings the evaluation compares: the source's words, sorted ("t04" < "t12": ids of two digits).
  const auto src = d->raw_sources(Split::Test), tgt = d->raw_targets(Split::Test);
  ASSERT_EQ(src.size(), tgt.size());
  for (size_t i = 0; i < src.size(); ++i) {
    auto words = [](const std::string& s) {
      std::istringstream in(s);
      std::vector<std::string> w;
      for (std::string x; in >> x;) w.push_back(x);
      return w;
    };
    auto want = words(src[i]);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(words(tgt[i]), want) << src[i];
  }
}

TEST_F(SyntheticTokensTest, BadRangesAreOneConfigErrorAtTheirOption) {
  auto e = config_error("num_steps: 17, test_max_len: 32");
  EXPECT_TRUE(testutil::contains(e, "test_max_len")) << e;
  EXPECT_TRUE(testutil::contains(e, "need num_steps >= 33, found num_steps 17")) << e;
  e = config_error("num_steps: 17, max_len: 17");
  EXPECT_TRUE(testutil::contains(e, "max_len")) << e;
  EXPECT_TRUE(testutil::contains(e, "need num_steps >= 18, found num_steps 17")) << e;
  e = config_error("min_len: 5, max_len: 4");
  EXPECT_TRUE(testutil::contains(e, "max_len")) << e;
  EXPECT_TRUE(testutil::contains(e, "min_len 5 exceeds max_len 4")) << e;
  e = config_error("num_steps: 33, max_len: 16, test_min_len: 20");  // test_max_len: max_len's 16
  EXPECT_TRUE(testutil::contains(e, "test_min_len 20 exceeds test_max_len 16")) << e;
  e = config_error("num_steps: 33, test_min_len: 20, test_max_len: 18");
  EXPECT_TRUE(testutil::contains(e, "test_min_len 20 exceeds test_max_len 18")) << e;
  e = config_error("min_len: 11");  // as before: no room for <eos> in the default num_steps 11
  EXPECT_TRUE(testutil::contains(e, "min_len")) << e;
  EXPECT_TRUE(testutil::contains(e, "must leave room for <eos> in num_steps 11, found 11")) << e;
  e = config_error("task: sorted");
  EXPECT_TRUE(testutil::contains(e, "sort")) << e;
}

}  // namespace
