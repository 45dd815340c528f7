// The lm_tasks dataset plugin, loaded from its built library as the runner loads it: each task's
// rows in Batch's decoder-only layout and only its answers scored (repeated: the second copy;
// mqar: Zoology's keys, values, one query per key at power-law gaps; copy, reverse, sort: f(x)
// and <eos> after <sep>), the length ranges of train and test, the data a function of its seed
// (fresh rows per epoch too), Zoology's asserts as config errors at their options, and
// data::LanguageModelData (found by dynamic_cast across the plugin boundary).
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

namespace {

using namespace attnlab;
using data::Split;

class LmTasksTest : public testutil::PluginFileTest {
 protected:
  /// The dataset `options` ("task: mqar, seq_len: 32") configure, prepared.
  static std::shared_ptr<data::Dataset> make(const std::string& options) {
    auto d = create<data::Dataset>("dataset", "plugin: lm_tasks" + (options.empty() ? "" : ", " + options));
    d->prepare("");
    return d;
  }
  /// The ConfigError's message that `options` give (a failed test when they give none).
  static std::string config_error(const std::string& options) {
    return testutil::message_of<ConfigError>([&] { make(options); });
  }
  /// A split's batches (shuffled with `seed` when `shuffle`) as one batch.
  static data::Batch all(const data::Dataset& d, Split split, bool shuffle = false, uint64_t seed = 0) {
    std::vector<torch::Tensor> in, out, lens;
    for (const auto& b : d.batches(split, shuffle, seed)) {
      EXPECT_FALSE(b.src.defined());  // decoder-only
      EXPECT_FALSE(b.src_valid_lens.defined());
      in.push_back(b.tgt_in);
      out.push_back(b.tgt_out);
      lens.push_back(b.tgt_valid_lens);
    }
    data::Batch b;
    b.tgt_in = torch::cat(in);
    b.tgt_out = torch::cat(out);
    b.tgt_valid_lens = torch::cat(lens);
    return b;
  }
  static const data::LanguageModelData& lm(const data::Dataset& d) {
    const auto* l = dynamic_cast<const data::LanguageModelData*>(&d);
    if (l == nullptr) throw std::runtime_error("lm_tasks is no data::LanguageModelData");
    return *l;
  }
};

std::vector<int64_t> row(const torch::Tensor& t) {
  const auto r = t.contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

bool same(const data::Batch& a, const data::Batch& b) {
  return a.tgt_in.equal(b.tgt_in) && a.tgt_out.equal(b.tgt_out) && a.tgt_valid_lens.equal(b.tgt_valid_lens);
}

TEST_F(LmTasksTest, RepeatedHalvesAreEqualAndOnlyTheSecondIsScored) {
  for (const bool bos : {true, false}) {
    const auto d = make(std::string("task: repeated, vocab_size: 16, half_len: 10, num_train: 300, batch_size: 7") +
                        (bos ? "" : ", bos: false"));
    const auto info = d->info();
    const int64_t h = 10, T = bos ? 2 * h : 2 * h - 1, b = bos ? 1 : 0;
    EXPECT_EQ(info.num_steps, T);
    EXPECT_EQ(info.pad_id, 0);
    EXPECT_EQ(info.bos_id, bos ? 2 : -1);
    EXPECT_EQ(info.eos_id, -1);
    const int64_t low = bos ? 3 : 2;  // <pad> <unk> [<bos>]
    EXPECT_EQ(info.tgt_vocab_size, low + 16);
    EXPECT_EQ(*info.meta.get<std::string>("lm.task"), "repeated");
    EXPECT_EQ(*info.meta.range("lm.tokens"), (std::pair<double, double>{low, low + 16}));
    const auto batch = all(*d, Split::Train);
    ASSERT_EQ(batch.tgt_in.sizes(), (std::vector<int64_t>{300, T}));
    // The row: tgt_in, then tgt_out's last label.
    const auto full = torch::cat({batch.tgt_in, batch.tgt_out.narrow(1, T - 1, 1)}, 1);  // [N, 2h + b]
    if (bos) {
      EXPECT_TRUE(full.select(1, 0).eq(2).all().item<bool>());
    }
    const auto first = full.narrow(1, b, h), second = full.narrow(1, b + h, h);
    EXPECT_TRUE(first.equal(second));
    EXPECT_TRUE(first.ge(low).all().item<bool>() && first.lt(low + 16).all().item<bool>());
    EXPECT_EQ(std::get<0>(at::_unique(first)).numel(), 16);  // every ordinary token drawn
    // Labels: <pad> for the first T - h, then the second copy.
    EXPECT_TRUE(batch.tgt_out.narrow(1, 0, T - h).eq(0).all().item<bool>());
    EXPECT_TRUE(batch.tgt_out.narrow(1, T - h, h).equal(second));
    EXPECT_TRUE(batch.tgt_in.narrow(1, 1, T - 1).equal(full.narrow(1, 1, T - 1)));
    EXPECT_TRUE(batch.tgt_valid_lens.eq(h).all().item<bool>());
  }
  // loss_on: all scores every next token.
  const auto b = all(*make("task: repeated, half_len: 5, loss_on: all"), Split::Val);
  EXPECT_TRUE(b.tgt_out.ne(0).all().item<bool>());
  EXPECT_TRUE(b.tgt_out.narrow(1, 0, 9).equal(b.tgt_in.narrow(1, 1, 9)));
  EXPECT_TRUE(b.tgt_valid_lens.eq(10).all().item<bool>());
}

TEST_F(LmTasksTest, RepeatedHalvesOfDrawnLengthsAreRightPadded) {
  const auto d = make("task: repeated, vocab_size: 16, half_len: 12, min_half_len: 4, num_train: 600");
  EXPECT_EQ(d->info().num_steps, 24);  // <bos> + 2 x 12 - 1
  const auto b = all(*d, Split::Train);
  EXPECT_EQ(b.tgt_valid_lens.min().item<int64_t>(), 4);
  EXPECT_EQ(b.tgt_valid_lens.max().item<int64_t>(), 12);
  for (int64_t n = 0; n < b.tgt_in.size(0); ++n) {
    const int64_t h = b.tgt_valid_lens[n].item<int64_t>(), inputs = 2 * h;  // <bos> r r less the last
    const auto in = row(b.tgt_in[n]), out = row(b.tgt_out[n]);
    ASSERT_EQ(in[0], 2);  // <bos>
    const std::vector<int64_t> first(in.begin() + 1, in.begin() + 1 + h);
    EXPECT_EQ(std::vector<int64_t>(in.begin() + 1 + h, in.begin() + inputs),
              std::vector<int64_t>(first.begin(), first.end() - 1));
    EXPECT_TRUE(std::all_of(out.begin(), out.begin() + h, [](int64_t id) { return id == 0; })) << "row " << n;
    EXPECT_EQ(std::vector<int64_t>(out.begin() + h, out.begin() + inputs), first) << "row " << n;
    EXPECT_TRUE(std::all_of(in.begin() + inputs, in.end(), [](int64_t id) { return id == 0; })) << "row " << n;
    EXPECT_TRUE(std::all_of(out.begin() + inputs, out.end(), [](int64_t id) { return id == 0; })) << "row " << n;
  }
  const auto all_labels = all(*make("task: repeated, half_len: 6, min_half_len: 2, loss_on: all"), Split::Val);
  EXPECT_TRUE(all_labels.tgt_valid_lens.equal(all_labels.tgt_out.ne(0).sum(1)));
  EXPECT_TRUE(all_labels.tgt_in.ne(0).sum(1).equal(all_labels.tgt_valid_lens));
}

/// One MQAR row read back: keys and values of the pairs, and per scored label (query) its
/// position, the input there and the label.
struct MqarRow {
  std::vector<int64_t> keys, values, query_at, queried, answers;
};

MqarRow read_mqar(const torch::Tensor& in, const torch::Tensor& out, int64_t kv, int64_t pad) {
  MqarRow r;
  const auto i = row(in), o = row(out);
  for (int64_t p = 0; p < kv; ++p) {
    r.keys.push_back(i[static_cast<size_t>(2 * p)]);
    r.values.push_back(i[static_cast<size_t>(2 * p + 1)]);
  }
  for (size_t t = 0; t < o.size(); ++t) {
    if (o[t] == pad) continue;
    r.query_at.push_back(static_cast<int64_t>(t));
    r.queried.push_back(i[t]);
    r.answers.push_back(o[t]);
  }
  return r;
}

TEST_F(LmTasksTest, MqarIsZoologysMultiQueryAssociativeRecall) {
  const int64_t V = 128, L = 64, kv = 4, space = (L - 2 * kv) / 2;
  const auto d = make("task: mqar, vocab_size: 128, seq_len: 64, num_kv_pairs: 4, num_train: 4000");
  const auto info = d->info();
  EXPECT_EQ(info.tgt_vocab_size, V + 1);  // Zoology's ids, then <pad>
  EXPECT_EQ(info.pad_id, V);
  EXPECT_EQ(info.num_steps, L);
  EXPECT_EQ(info.bos_id, -1);
  EXPECT_EQ(*info.meta.get<std::string>("lm.task"), "mqar");
  EXPECT_EQ(*info.meta.range("lm.tokens"), (std::pair<double, double>{0, V}));
  EXPECT_EQ(d->tgt_vocab(), nullptr);  // no room for an <unk> among Zoology's ids
  const auto b = all(*d, Split::Train);
  ASSERT_EQ(b.tgt_in.sizes(), (std::vector<int64_t>{4000, L}));
  EXPECT_TRUE(b.tgt_valid_lens.eq(kv).all().item<bool>());
  EXPECT_TRUE(b.tgt_in.lt(V).all().item<bool>() && b.tgt_in.ge(0).all().item<bool>());
  std::vector<int64_t> gap_counts(static_cast<size_t>(space));
  for (int64_t n = 0; n < 4000; ++n) {
    const auto r = read_mqar(b.tgt_in[n], b.tgt_out[n], kv, V);
    const std::set<int64_t> keys(r.keys.begin(), r.keys.end()), values(r.values.begin(), r.values.end());
    ASSERT_EQ(keys.size(), static_cast<size_t>(kv)) << "row " << n;  // without replacement
    ASSERT_EQ(values.size(), static_cast<size_t>(kv)) << "row " << n;
    EXPECT_GE(*keys.begin(), 1);
    EXPECT_LT(*keys.rbegin(), V / 2);
    EXPECT_GE(*values.begin(), V / 2);
    EXPECT_LT(*values.rbegin(), V);
    // Each key queried once, at 2 kv + 2 gap, its value the label.
    ASSERT_EQ(r.queried.size(), static_cast<size_t>(kv)) << "row " << n;
    EXPECT_EQ(std::set<int64_t>(r.queried.begin(), r.queried.end()), keys) << "row " << n;
    for (size_t q = 0; q < r.queried.size(); ++q) {
      const auto k = std::find(r.keys.begin(), r.keys.end(), r.queried[q]) - r.keys.begin();
      EXPECT_EQ(r.answers[q], r.values[static_cast<size_t>(k)]) << "row " << n;
      const int64_t at = r.query_at[q];
      ASSERT_GE(at, 2 * kv);
      ASSERT_EQ((at - 2 * kv) % 2, 0);
      ++gap_counts[static_cast<size_t>((at - 2 * kv) / 2)];
    }
  }
  // The gaps' power law (a = 0.01: p ~ i^-0.99): the histogram decreases on average.
  int64_t first = 0, last = 0, rises = 0;
  for (int64_t g = 0; g < space; ++g) (g < space / 2 ? first : last) += gap_counts[static_cast<size_t>(g)];
  for (int64_t g = 0; g + 1 < space; ++g)
    rises += gap_counts[static_cast<size_t>(g + 1)] > gap_counts[static_cast<size_t>(g)];
  EXPECT_GT(first, last * 3 / 2);
  EXPECT_EQ(std::max_element(gap_counts.begin(), gap_counts.end()) - gap_counts.begin(), 0);
  EXPECT_GT(gap_counts.front(), 4 * gap_counts.back());
  EXPECT_LT(rises, space / 3);

  // power_a: 1 is uniform; without random_non_queries, every position left is token 0.
  const auto u =
      all(*make("task: mqar, vocab_size: 128, power_a: 1, random_non_queries: false, num_train: 2000"), Split::Train);
  std::vector<int64_t> flat(static_cast<size_t>(space));
  for (int64_t n = 0; n < 2000; ++n) {
    const auto r = read_mqar(u.tgt_in[n], u.tgt_out[n], kv, V);
    for (int64_t at : r.query_at) ++flat[static_cast<size_t>((at - 2 * kv) / 2)];
    auto ids = row(u.tgt_in[n]);
    for (int64_t at : r.query_at) ids[static_cast<size_t>(at)] = 0;
    EXPECT_TRUE(std::all_of(ids.begin() + 2 * kv, ids.end(), [](int64_t id) { return id == 0; })) << "row " << n;
  }
  const double mean = 2000.0 * kv / space;
  for (int64_t c : flat) EXPECT_NEAR(static_cast<double>(c), mean, 0.3 * mean);
}

TEST_F(LmTasksTest, ZoologysAssertsAreConfigErrorsAtTheirOptions) {
  // Each: the options, then what the one error says (the option's name first).
  const std::vector<std::vector<std::string>> cases = {
      {"task: mqar, vocab_size: 128, seq_len: 63", "seq_len", "must be even"},
      {"task: mqar, vocab_size: 64, seq_len: 64", "vocab_size", "must exceed seq_len 64"},
      {"task: mqar, seq_len: 8192", "vocab_size", "found 8192 (the default)"},
      {"task: mqar, vocab_size: 128, seq_len: 64, num_kv_pairs: 17", "num_kv_pairs", "68 <= seq_len"},
      {"task: mqar, power_a: 0", "power_a", "must be > 0"},
      // Another task's option, and empty or bad ranges.
      {"task: copy, half_len: 4", "half_len", "option of task repeated, not of task copy"},
      {"task: repeated, seq_len: 32", "seq_len", "option of task mqar"},
      {"task: mqar, train_len: [1, 4]", "train_len", "option of task copy, reverse and sort"},
      {"task: copy, train_len: [5, 4]", "train_len", "min 5 exceeds max 4"},
      {"task: copy, test_len: [0, 4]", "test_len", "min must be >= 1"},
      {"task: sort, test_len: 7", "test_len", "expected [min, max]"},
      {"task: repeated, half_len: 6, min_half_len: 7", "min_half_len", "7 exceeds half_len 6"},
      {"task: sorted", "task", "sort"},
  };
  for (const auto& c : cases) {
    const auto e = config_error(c[0]);
    for (size_t i = 1; i < c.size(); ++i) EXPECT_TRUE(testutil::contains(e, c[i])) << c[0] << ": " << e;
  }
  // Another task's option at its default is no mistake: a stored run's config lists every option.
  EXPECT_NO_THROW(make("task: copy, half_len: 32, seq_len: 64, power_a: 0.01, bos: true, min_half_len: ~"));
  EXPECT_NO_THROW(make("task: mqar, train_len: [1, 8], test_len: ~, loss_on: second_half"));
  // 4 kv = L is Zoology's largest: allowed.
  EXPECT_NO_THROW(make("task: mqar, vocab_size: 128, seq_len: 64, num_kv_pairs: 16, num_train: 10"));
}

TEST_F(LmTasksTest, CopyReverseSortScoreOnlyTheAnswerAfterSep) {
  for (const std::string task : {"copy", "reverse", "sort"}) {
    const auto d = make("task: " + task + ", vocab_size: 10, train_len: [1, 6], num_train: 500");
    const auto info = d->info();
    const int64_t pad = 0, sep = 2, eos = 3, low = 4;  // <pad> <unk> <sep> <eos>
    EXPECT_EQ(info.pad_id, pad);
    EXPECT_EQ(info.eos_id, eos);
    EXPECT_EQ(info.bos_id, -1);
    EXPECT_EQ(info.num_steps, 13);
    EXPECT_EQ(info.tgt_vocab_size, low + 10);
    ASSERT_NE(d->tgt_vocab(), nullptr);
    EXPECT_EQ(d->tgt_vocab()->token(sep), "<sep>");
    const auto b = all(*d, Split::Train);
    for (int64_t n = 0; n < b.tgt_in.size(0); ++n) {
      const auto in = row(b.tgt_in[n]), out = row(b.tgt_out[n]);
      const auto len = std::find(in.begin(), in.end(), sep) - in.begin();
      ASSERT_LT(len, static_cast<int64_t>(in.size())) << task << " row " << n;
      std::vector<int64_t> x(in.begin(), in.begin() + len), want = x;
      EXPECT_TRUE(std::all_of(x.begin(), x.end(), [&](int64_t id) { return id >= low && id < low + 10; }));
      if (task == "reverse") std::reverse(want.begin(), want.end());
      if (task == "sort") std::sort(want.begin(), want.end());
      // Labels: <pad> before <sep>'s position, then f(x), <eos>, <pad>.
      EXPECT_TRUE(std::all_of(out.begin(), out.begin() + len, [&](int64_t id) { return id == pad; }));
      EXPECT_EQ(std::vector<int64_t>(out.begin() + len, out.begin() + 2 * len), want) << task << " row " << n;
      EXPECT_EQ(out[static_cast<size_t>(2 * len)], eos);
      EXPECT_TRUE(std::all_of(out.begin() + 2 * len + 1, out.end(), [&](int64_t id) { return id == pad; }));
      // Inputs: x <sep> f(x), then <pad>.
      EXPECT_EQ(std::vector<int64_t>(in.begin() + len + 1, in.begin() + 2 * len + 1), want);
      EXPECT_TRUE(std::all_of(in.begin() + 2 * len + 1, in.end(), [&](int64_t id) { return id == pad; }));
      EXPECT_EQ(b.tgt_valid_lens[n].item<int64_t>(), len + 1);
      EXPECT_EQ(std::count_if(out.begin(), out.end(), [&](int64_t id) { return id != pad; }), len + 1);
    }
  }
}

TEST_F(LmTasksTest, TrainAndTestDrawLengthsInTheirOwnRanges) {
  const auto d = make("task: copy, train_len: [2, 8], test_len: [9, 16], num_train: 1000, num_val: 300, num_test: 600");
  EXPECT_EQ(d->info().num_steps, 33);  // the longest row: 16 + <sep> + 16 (the last input)
  for (auto [split, lo, hi] : {std::tuple{Split::Train, 2, 8}, {Split::Val, 2, 8}, {Split::Test, 9, 16}}) {
    const auto b = all(*d, split);
    EXPECT_EQ(b.tgt_in.size(1), 2 * hi + 1) << data::split_name(split);  // each split padded to its own longest
    const auto words = b.tgt_valid_lens - 1;                             // [N] tokens of x
    EXPECT_EQ(words.min().item<int64_t>(), lo) << data::split_name(split);
    EXPECT_EQ(words.max().item<int64_t>(), hi) << data::split_name(split);
  }
  // test_len null: the train range.
  const auto t = all(*make("task: reverse, train_len: [3, 5], num_test: 400"), Split::Test);
  EXPECT_EQ((t.tgt_valid_lens - 1).min().item<int64_t>(), 3);
  EXPECT_EQ((t.tgt_valid_lens - 1).max().item<int64_t>(), 5);
}

TEST_F(LmTasksTest, TheDataIsAFunctionOfItsSeed) {
  for (const std::string task : {"repeated", "mqar", "sort"}) {
    const std::string options = "task: " + task + ", num_train: 64, num_val: 16, num_test: 16";
    const auto a = make(options), b = make(options), c = make(options + ", seed: 1");
    for (auto split : {Split::Train, Split::Val, Split::Test}) {
      EXPECT_TRUE(same(all(*a, split), all(*b, split))) << task;
      EXPECT_FALSE(same(all(*a, split), all(*c, split))) << task;
    }
    EXPECT_FALSE(same(all(*a, Split::Train), all(*a, Split::Val))) << task;  // splits differ
    // Shuffling: a permutation of the same rows, by the seed given.
    const auto s = all(*a, Split::Train, true, 7);
    EXPECT_TRUE(same(s, all(*b, Split::Train, true, 7))) << task;
    EXPECT_FALSE(same(s, all(*a, Split::Train))) << task;
    EXPECT_TRUE(std::get<0>(s.tgt_in.sum(1).sort()).equal(std::get<0>(all(*a, Split::Train).tgt_in.sum(1).sort())));
  }
}

TEST_F(LmTasksTest, FreshRedrawsTrainingRowsPerEpochFromTheSeed) {
  for (const std::string task : {"repeated", "mqar", "copy"}) {
    const std::string options = "task: " + task + ", num_train: 40, batch_size: 8, fresh: true";
    const auto a = make(options), b = make(options), other = make(options + ", seed: 5");
    const auto e1 = all(*a, Split::Train, true, 1), e2 = all(*a, Split::Train, true, 2);
    EXPECT_FALSE(same(e1, e2)) << task;                                  // another epoch, other rows
    EXPECT_TRUE(same(e1, all(*a, Split::Train, true, 1))) << task;       // asked again, the same
    EXPECT_TRUE(same(e1, all(*b, Split::Train, true, 1))) << task;       // another instance, the same
    EXPECT_FALSE(same(e1, all(*other, Split::Train, true, 1))) << task;  // another data seed, others
    EXPECT_EQ(e1.tgt_in.size(0), 40);
    EXPECT_EQ(a->batches(Split::Train, true, 1).size(), 5u);
    // Val and the unshuffled training rows stay those of prepare().
    const auto plain = make("task: " + task + ", num_train: 40, batch_size: 8");
    EXPECT_TRUE(same(all(*a, Split::Train), all(*plain, Split::Train))) << task;
    EXPECT_TRUE(same(all(*a, Split::Val, true, 1), all(*plain, Split::Val, true, 1))) << task;
  }
}

TEST_F(LmTasksTest, PromptsAndLabelsAreTokenNamesOrIds) {
  const auto d = make("task: copy, vocab_size: 8");  // <pad> <unk> <sep> <eos> 4 .. 11
  const auto& l = lm(*d);
  EXPECT_EQ(l.encode_prompt("4 11 <sep> 4"), (std::vector<int64_t>{4, 11, 2, 4}));
  EXPECT_EQ(l.encode_prompt("  5\t2 3 "), (std::vector<int64_t>{5, 2, 3}));  // ids of specials too
  EXPECT_EQ(l.decode({4, 2, 4, 3, 0}), "4 <sep> 4 <eos> <pad>");
  EXPECT_EQ(l.token_labels({0, 2, 9}), (std::vector<std::string>{"<pad>", "<sep>", "9"}));
  EXPECT_EQ(d->decode_target({4, 0, 5, 3, 6}), "4 5");  // <pad> left out, stops at <eos>
  auto e = testutil::message_of<DataError>([&] { l.encode_prompt("4 x7 5"); });
  EXPECT_TRUE(testutil::contains(e, "'x7' at byte 2")) << e;
  e = testutil::message_of<DataError>([&] { l.encode_prompt("12"); });
  EXPECT_TRUE(testutil::contains(e, "ordinary tokens 4 to 11")) << e;
  EXPECT_TRUE(testutil::contains(e, "<sep> (2)")) << e;

  const auto m = make("task: mqar, vocab_size: 100, seq_len: 16, num_kv_pairs: 2");
  EXPECT_EQ(lm(*m).encode_prompt("0 99 <pad>"), (std::vector<int64_t>{0, 99, 100}));
  EXPECT_EQ(lm(*m).decode({3, 100}), "3 <pad>");
}

}  // namespace
