// End to end with the real runner: train short, test long on synthetic_tokens (the length
// extrapolation study's data, experiments/studies/length_extrapolation). A run with test lengths
// beyond the training ones evaluates the test split into /eval/test/{sources,references,hypotheses}
// (the strings exact match is computed from), `runner eval --split test` decodes up to the dataset's
// num_steps, and a test range that does not fit num_steps is one config error before anything is
// written.
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

class LengthExtrapolationRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-lenx"; }
};

TEST_F(LengthExtrapolationRun, TestSplitOfLongerSequencesIsEvaluatedAndDecodedToNumSteps) {
  // tiny_synthetic (num_test 48) trained on 1..4 words, tested on 8..12, sorted targets.
  const auto h5 = tmp_ + "/sort.h5";
  auto r = run(testutil::tiny_synthetic(
      h5, {"dataset.num_steps=13", "dataset.max_len=4", "dataset.test_min_len=8", "dataset.test_max_len=12",
           "dataset.task=sort", "trainer.max_epochs=1", "evaluate.split=test", "-q"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto ev = run({"eval", h5, "--split", "val", "-q"});
  ASSERT_EQ(ev.exit_code, 0) << ev.out << ev.err;
  {  // closed before runner eval writes the file again
    results::ResultsReader rr(h5);
    for (const char* part : {"sources", "references", "hypotheses"}) {
      EXPECT_EQ(rr.strings(std::string("eval/test/") + part).size(), 48u) << part;
    }
    const auto src = rr.strings("eval/test/sources"), ref = rr.strings("eval/test/references");
    size_t shortest = 99, longest = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      auto w = words(src[i]);
      shortest = std::min(shortest, w.size());
      longest = std::max(longest, w.size());
      std::sort(w.begin(), w.end());
      EXPECT_EQ(words(ref[i]), w) << src[i];
    }
    EXPECT_EQ(shortest, 8u);
    EXPECT_EQ(longest, 12u);
    for (const auto& s : rr.strings("eval/val/sources")) EXPECT_LE(words(s).size(), 4u) << s;
    // No --max-steps (0): up to the dataset's num_steps, 13 tokens, which the config check makes hold
    // test_max_len words and <eos>; --max-steps cuts shorter.
    EXPECT_EQ(rr.attr_double_at("eval/test", "max_steps"), 0.0);
    for (const auto& h : rr.strings("eval/test/hypotheses")) EXPECT_LE(words(h).size(), 13u) << h;
  }
  auto cut = run({"eval", h5, "--split", "test", "--max-steps", "2", "--name", "cut", "-q"});
  ASSERT_EQ(cut.exit_code, 0) << cut.out << cut.err;
  for (const auto& h : results::ResultsReader(h5).strings("eval/cut/hypotheses")) EXPECT_LE(words(h).size(), 2u);
}

TEST_F(LengthExtrapolationRun, ATestRangeBeyondNumStepsIsOneConfigErrorAtItsPlace) {
  const auto h5 = tmp_ + "/bad.h5";
  auto r = run(testutil::tiny_synthetic(h5, {"dataset.test_max_len=20", "-q"}));  // num_steps 8
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "(at 'dataset.test_max_len')")) << r.err;
  EXPECT_TRUE(testutil::contains(r.err, "test_max_len 20 words and <eos> need num_steps >= 21, found num_steps 8"))
      << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_FALSE(fs::exists(h5));
}

}  // namespace
