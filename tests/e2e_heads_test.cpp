// End to end with the real runner: `runner heads` scores every head of a tiny decoder-only
// language model on repeated random tokens, stores /head_scores/<name> (and the maps of sequence
// 0 with --attention), replaces a name asked again, and refuses bad input and a translation run
// with one clear error each, leaving the results file as it was.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/chromium.hpp"
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
  expect_error(path, {"--name", "training"}, "trainer.head_scores_every");
  expect_error(path, {"--checkpoint", "epoch-99"}, "no checkpoint");
  // A translation model: one error that names the command that measures its heads.
  const auto translation = tmp_ + "/translation.h5";
  const auto t = run(testutil::tiny_synthetic(translation, {"trainer.max_epochs=1", "-q"}));
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  expect_error(translation, {}, "is not a decoder-only language model");
  expect_error(translation, {}, "runner ablate");
}

TEST_F(HeadsRun, TheTrainerScoresHeadsDuringTrainingAsRunnerHeadsDoesAndAResumeKeepsTheSeries) {
  const std::vector<std::string> every{"trainer.head_scores_every=10", "trainer.head_scores_length=8",
                                       "trainer.head_scores_sequences=4", "trainer.eval_every=10"};
  const auto lm = [&](const std::string& results, std::vector<std::string> extra) {
    std::vector<std::string> args{"experiments/tests/tiny_lm.yaml", "--results", results, "-q", "data_dir=" + data_dir_};
    args.insert(args.end(), every.begin(), every.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto whole = tmp_ + "/whole.h5", two = tmp_ + "/two.h5";
  auto r = lm(whole, {"trainer.max_steps=30"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string at = "head_scores/training";
  {
    results::ResultsReader res(whole);
    EXPECT_EQ(res.children(at), (std::vector<std::string>{"step_0", "step_10", "step_20", "step_30"}));
    EXPECT_EQ(res.attr_double_at(at, "every"), 10);
    EXPECT_EQ(res.attr_double_at(at + "/step_20", "step"), 20);
    EXPECT_EQ(res.attr_double_at(at + "/step_20", "length"), 8);
    EXPECT_NE(res.array(at + "/step_0/previous_token").values, res.array(at + "/step_30/previous_token").values)
        << "the heads change while the model trains";
    // The first-token mass on validation rows as well: [layers, heads], shares of attention.
    const auto val = res.array(at + "/step_30/val_first_token_mass");
    EXPECT_EQ(val.shape, res.array(at + "/step_30/first_token_mass").shape);
    for (const float v : val.values) EXPECT_TRUE(v > 0 && v < 1) << v;
    EXPECT_NE(val.values, res.array(at + "/step_30/first_token_mass").values) << "measured on other rows";
  }
  // The scores after step 30 are runner heads' on the last checkpoint with the same tokens (seed 0).
  r = heads(whole, {"--checkpoint", "last", "--length", "8", "--sequences", "4", "--seed", "0", "--name", "last", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    results::ResultsReader res(whole);
    for (const auto& score : kScores) {
      const auto a = res.array(at + "/step_30/" + score).values, b = res.array("head_scores/last/" + score).values;
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << score << " " << i;
    }
  }
  // Stopped after 20 steps, with scores of a lost session beyond its checkpoint (step 25), and resumed.
  ASSERT_EQ(lm(two, {"trainer.max_steps=20"}).exit_code, 0);
  {
    results::Results out(two, results::Results::Open::Existing);
    out.write_array(at + "/step_25/induction", results::FloatArray{{1, 2}, {0.5f, 0.5f}});
  }
  r = lm(two, {"trainer.max_steps=30", "--resume", two});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader a(whole), b(two);
  EXPECT_EQ(b.children(at), (std::vector<std::string>{"step_0", "step_10", "step_20", "step_30"}));
  auto with_val = kScores;
  with_val.push_back("val_first_token_mass");
  for (const auto& step : b.children(at)) {
    for (const auto& score : with_val) {
      EXPECT_EQ(a.array(at + "/" + step + "/" + score).values, b.array(at + "/" + step + "/" + score).values)
          << step << " " << score << ": bit-identical after a resume";
    }
  }
  EXPECT_EQ(a.metric("train", "loss"), b.metric("train", "loss"));
}

/// Counts the head scores' marks, reads the curve's tooltips, switches the curve to previous-token.
constexpr const char* kReportHarness = R"js(
  whenReady(function (start) {
    var r = { ready: start.ready, nav: texts("nav a"), grids: count("#head-scores .score-grid"),
      cells: count("#head-scores .score-grid g.scell path"), values: texts("#head-scores .score-grid g.sval text"),
      lines: count("#head-scores .score-curve g.sline path"), points: count("#head-scores .score-curve g.spt path"),
      headings: texts("#head-scores h3"), generated: texts("#predictions pre.generated"),
      generatedBold: texts("#predictions pre.generated b"), generatedHow: texts("#predictions .generation .muted") };
    r.tips = [];
    window.attnlabReport.views.forEach(function (v) {
      try { v.data("pts").forEach(function (d) { if (d.tip) r.tips.push(d.tip); }); } catch (e) {}
    });
    var pick = document.querySelector("#head-scores select.score-kind");
    pick.value = "previous_token";
    pick.dispatchEvent(new Event("change"));
    setTimeout(function () {
      r.kind = document.querySelector("#head-scores .score-curve").getAttribute("data-kind");
      r.linesAfter = count("#head-scores .score-curve g.sline path");
      done(r);
    }, 500);
  });
)js";

TEST_F(HeadsRun, ReportDrawsTheHeadScoreGridsAndTheirCurvesOverTraining) {
  const auto path = tmp_ + "/lm.h5";
  auto r = run({"experiments/tests/tiny_lm.yaml", "--results", path, "-q", "data_dir=" + data_dir_,
                "trainer.head_scores_every=10", "trainer.head_scores_length=8", "trainer.head_scores_sequences=4"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(heads(path, {"--length", "8", "--sequences", "4", "-q"}).exit_code, 0);
  const auto g = run({"generate", path, "data_dir=" + data_dir_, "--prompt", "I am ", "--tokens", "12", "--temperature",
                      "0", "--name", "greedy"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto page = tmp_ + "/lm.html";
  r = run({"report", path, "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = testutil::browse(page, kReportHarness, tmp_);
  ASSERT_FALSE(json.empty());
  EXPECT_TRUE(testutil::contains(json, "\"errors\":[]")) << json;
  EXPECT_TRUE(testutil::contains(json, "\"ready\":\"1\"")) << json;
  EXPECT_TRUE(testutil::contains(json, "\"Head scores\"")) << "the nav link\n" << json;
  // runner heads' group (4 kinds) and the last training step (5: the first-token mass on validation
  // rows too), 1 layer x 2 heads.
  EXPECT_EQ(testutil::harness_field(json, "grids"), 9) << json;
  EXPECT_EQ(testutil::harness_field(json, "cells"), 18) << json;
  EXPECT_EQ(testutil::harness_field(json, "lines"), 2) << "a line per head\n" << json;
  EXPECT_EQ(testutil::harness_field(json, "points"), 6) << "steps 0, 10, 20\n" << json;
  EXPECT_EQ(testutil::harness_field(json, "linesAfter"), 2) << json;
  EXPECT_TRUE(testutil::contains(json, "\"kind\":\"previous_token\"")) << json;
  EXPECT_TRUE(testutil::contains(json, "L1 H2 after step 20: induction 0.")) << json;
  EXPECT_TRUE(testutil::contains(json, "over training")) << json;
  EXPECT_TRUE(testutil::contains(json, "'repeated_random'")) << json;
  // The generation under "Outputs": the prompt in bold, then what followed it, and how.
  EXPECT_TRUE(testutil::contains(json, "\"generated\":[\"I am ")) << json;
  EXPECT_TRUE(testutil::contains(json, "\"generatedBold\":[\"I am \"]")) << json;
  EXPECT_TRUE(testutil::contains(json, "greedy: greedy, 12 tokens, best checkpoint")) << json;
}

TEST_F(HeadsRun, HeadScoresDuringTrainingRefuseWhatTheyCannotMeasure) {
  const auto expect_error = [&](std::vector<std::string> extra, const std::string& needle) {
    const auto path = tmp_ + "/bad.h5";
    std::vector<std::string> args{"experiments/tests/tiny_lm.yaml", "--results", path, "-q", "data_dir=" + data_dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_NE(r.exit_code, 0) << needle;
    EXPECT_TRUE(testutil::contains(r.err, needle)) << "expected '" << needle << "' in:\n" << r.err;
  };
  expect_error({"trainer.head_scores_every=5", "trainer.head_scores_length=40"},
               "head_scores_length 40: the head scores' sequences of 2 x 40 tokens are beyond the 64 positions");
  expect_error({"trainer.head_scores_every=5", "trainer.max_steps=0", "trainer.max_epochs=1"},
               "give max_steps");
  expect_error({"trainer.head_scores_every=-1"}, "head_scores_every");
}

}  // namespace
}  // namespace e2e_heads_test
