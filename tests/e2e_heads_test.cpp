// End to end with the real runner: `runner heads` scores every head of a tiny decoder-only
// language model on repeated random tokens, stores /head_scores/<name> (and the maps of sequence
// 0 with --attention), replaces a name asked again, and refuses bad input and a translation run
// with one clear error each, leaving the results file as it was.
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace e2e_heads_test {
namespace {
using namespace attnlab;

const std::vector<std::string> kScores = {"duplicate_token", "first_token_mass", "induction", "previous_token"};

class HeadsRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-heads"; }
  void SetUp() override {
    RunnerFixture::SetUp();
    REQUIRE_FRA_ENG();
  }
  /// experiments/tests/tiny_lm.yaml (1 block, 2 heads, max_len 64) trained into `results`.
  void train_lm(const std::string& results) {
    const auto r = run({"experiments/tests/tiny_lm.yaml", "--results", results, "-q", "data_dir=" + data_dir_});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  testutil::ProcessResult heads(const std::string& results, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"heads", results, "data_dir=" + data_dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
};

TEST_F(HeadsRun, ScoresEveryHeadAndStoresTheGroup) {
  const auto path = tmp_ + "/lm.h5";
  ASSERT_NO_FATAL_FAILURE(train_lm(path));
  const auto r = heads(path, {"--length", "20", "--sequences", "4", "--seed", "3", "--name", "rr", "--attention"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testutil::contains(r.out, "top induction head: layer 1 head ")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "top previous-token head: layer 1 head ")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "    1    2 ")) << "a row per head, numbered from 1:\n" << r.out;
  const auto again = heads(path, {"--length", "20", "--sequences", "4", "--seed", "3", "--name", "same", "-q"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "") << "-q prints nothing";
  {
    results::ResultsReader res(path);
    EXPECT_EQ(res.children("head_scores"), (std::vector<std::string>{"rr", "same"}));
    EXPECT_EQ(res.children("head_scores/rr"), kScores);
    for (const auto& score : kScores) {
      SCOPED_TRACE(score);
      const auto a = res.array("head_scores/rr/" + score);
      EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2}));  // [layers, heads]
      for (float v : a.values) EXPECT_TRUE(v >= 0 && v <= 1) << v;
      EXPECT_EQ(a.values, res.array("head_scores/same/" + score).values) << "the seed fixes the tokens";
      EXPECT_FALSE(res.attr_string_at("head_scores/rr/" + score, "definition").empty());
    }
    const std::string at = "head_scores/rr";
    EXPECT_EQ(res.attr_string_at(at, "module"), "decoder_self");
    EXPECT_EQ(res.attr_double_at(at, "sequences"), 4);
    EXPECT_EQ(res.attr_double_at(at, "length"), 20);
    EXPECT_EQ(res.attr_double_at(at, "seed"), 3);
    EXPECT_EQ(res.attr_double_at(at, "token_low"), 2) << "after <pad> and <unk>";
    const auto high = static_cast<int64_t>(res.attr_double_at(at, "token_high"));
    EXPECT_GT(high, 20) << "a character vocabulary";
    EXPECT_EQ(res.attr_string_at(at, "token_range"),
              "ids 2 to " + std::to_string(high - 1) + " of " + std::to_string(high) + " (after <pad>, <unk>)");
    EXPECT_EQ(res.attr_string_at(at, "checkpoint"), "best");
    EXPECT_EQ(res.attr_string_at(at, "error_measure"), "mul");
    EXPECT_EQ(res.attr_string_at(at, "attention"), "attention/rr");
    // Sequence 0's maps: 2 x 20 positions, labelled with its characters.
    const auto maps = res.attention("rr", "decoder_self");
    EXPECT_EQ(maps.weights.shape, (std::vector<int64_t>{1, 2, 40, 40}));
    EXPECT_EQ(maps.query_tokens.size(), 40u);
    EXPECT_EQ(maps.query_tokens[0], maps.query_tokens[20]) << "r r";
    EXPECT_FALSE(res.has("attention/same"));
  }
  // A name asked again replaces its group; the default name is repeated_random.
  ASSERT_EQ(heads(path, {"--length", "10", "--sequences", "2", "--name", "rr", "-q"}).exit_code, 0);
  ASSERT_EQ(heads(path, {"--length", "10", "--sequences", "2", "-q"}).exit_code, 0);
  results::ResultsReader res(path);
  EXPECT_EQ(res.children("head_scores"), (std::vector<std::string>{"repeated_random", "rr", "same"}));
  EXPECT_EQ(res.attr_double_at("head_scores/rr", "length"), 10);
  EXPECT_FALSE(res.has_attr_at("head_scores/rr", "attention"));
  EXPECT_EQ(res.array("head_scores/rr/induction").values, res.array("head_scores/repeated_random/induction").values);
}

TEST_F(HeadsRun, RefusesBadInputWithoutTouchingTheFile) {
  const auto path = tmp_ + "/lm.h5";
  ASSERT_NO_FATAL_FAILURE(train_lm(path));
  const auto expect_error = [&](const std::string& file, std::vector<std::string> extra, const std::string& needle) {
    const auto before = testutil::read_file(file);
    const auto r = heads(file, std::move(extra));
    EXPECT_NE(r.exit_code, 0) << needle;
    EXPECT_TRUE(testutil::contains(r.err, needle)) << "expected '" << needle << "' in:\n" << r.err;
    EXPECT_EQ(testutil::read_file(file), before) << needle << ": the results file is unchanged";
  };
  expect_error(path, {"--length", "0"}, "--length");
  expect_error(path, {"--length", "33"}, "--length 33: sequences of 2 x 33 = 66 tokens are beyond the 64 positions");
  expect_error(path, {"--sequences", "0"}, "--sequences");
  expect_error(path, {"--name", "a/b"}, "--name 'a/b'");
  expect_error(path, {"--checkpoint", "epoch-99"}, "no checkpoint");
  // A translation model: one error that names the command that measures its heads.
  const auto translation = tmp_ + "/translation.h5";
  const auto t = run(testutil::tiny_synthetic(translation, {"trainer.max_epochs=1", "-q"}));
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  expect_error(translation, {}, "is not a decoder-only language model");
  expect_error(translation, {}, "runner ablate");
}

}  // namespace
}  // namespace e2e_heads_test
