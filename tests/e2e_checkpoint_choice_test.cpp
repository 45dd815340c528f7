// End to end with the real runner, which weights a run ends with: trainer.keep_checkpoints keeps
// the last K epochs' weights, `runner average RUN.h5 --last K` writes their mean and `runner eval
// --checkpoint average` translates with it; val_bleu / best_by: bleu / patience pick best.pt by
// validation BLEU and stop a run that stopped improving; `runner eval --ensemble` decodes with
// several runs together. Bad inputs are one clear error each.
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <filesystem>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class AverageTest : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-average"; }

  std::vector<std::string> tiny(const std::string& results, std::vector<std::string> extra = {}) {
    return testutil::tiny_synthetic(results, std::move(extra));
  }
};

TEST_F(AverageTest, KeepsTheLastEpochsAveragesThemAndEvaluatesTheMean) {
  const auto path = tmp_ + "/avg.h5";
  auto trained = run(tiny(path, {"trainer.max_epochs=4", "trainer.keep_checkpoints=2"}));
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  const auto dir = train::checkpoint_dir(path);
  EXPECT_FALSE(fs::exists(dir + "/epoch-1.pt"));
  EXPECT_FALSE(fs::exists(dir + "/epoch-2.pt"));
  ASSERT_TRUE(fs::exists(dir + "/epoch-3.pt"));
  ASSERT_TRUE(fs::exists(dir + "/epoch-4.pt"));
  // The newest kept epoch holds last.pt's weights.
  auto e3 = train::checkpoint_tensors(dir + "/epoch-3.pt"), e4 = train::checkpoint_tensors(dir + "/epoch-4.pt");
  auto last = train::checkpoint_tensors(dir + "/last.pt");
  ASSERT_EQ(e4.size(), last.size());
  for (const auto& [k, t] : last) EXPECT_TRUE(torch::equal(t, e4.at(k))) << k;

  auto avg = run({"average", path, "--last", "2"});
  ASSERT_EQ(avg.exit_code, 0) << avg.out << avg.err;
  EXPECT_NE(avg.out.find("averaged epochs 3-4 of"), std::string::npos) << avg.out;
  EXPECT_NE(avg.out.find("--checkpoint average"), std::string::npos) << avg.out;
  auto mean = train::checkpoint_tensors(dir + "/average.pt");
  ASSERT_EQ(mean.size(), e4.size());
  int64_t differing = 0;
  for (const auto& [k, t] : e4) {
    if (!t.is_floating_point()) continue;
    EXPECT_TRUE(torch::allclose(mean.at(k), (e3.at(k) + t) / 2, 1e-6, 1e-7)) << k;
    differing += torch::equal(e3.at(k), t) ? 0 : 1;
  }
  EXPECT_GT(differing, 0) << "epochs 3 and 4 trained, so their mean is neither";

  auto eval = run({"eval", path, "--split", "val", "--checkpoint", "average", "--name", "val_average", "-q"});
  ASSERT_EQ(eval.exit_code, 0) << eval.out << eval.err;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string_at("eval/val_average", "checkpoint"), "average");
  EXPECT_EQ(rd.attr_string_at("checkpoints/average", "epochs"), "3 4");
  EXPECT_EQ(rd.attr_string("status"), "completed");
  auto epoch = run({"eval", path, "--split", "val", "--checkpoint", "epoch-3", "-q", "--name", "val_e3"});
  EXPECT_EQ(epoch.exit_code, 0) << epoch.err;

  // Bad inputs: each one error naming what to do, nothing written.
  auto too_many = run({"average", path, "--last", "3"});
  EXPECT_EQ(too_many.exit_code, 1);
  EXPECT_NE(too_many.err.find("kept 2 (epochs 3-4)"), std::string::npos) << too_many.err;
  EXPECT_NE(too_many.err.find("trainer.keep_checkpoints: 3"), std::string::npos) << too_many.err;
  auto own = run({"average", path, "--last", "1", "--name", "best"});
  EXPECT_EQ(own.exit_code, 1);
  EXPECT_NE(own.err.find("the trainer's own checkpoint"), std::string::npos) << own.err;
  auto path_name = run({"average", path, "--last", "1", "--name", "../x"});
  EXPECT_EQ(path_name.exit_code, 1);
  EXPECT_FALSE(fs::exists(tmp_ + "/x.pt"));
  auto missing = run({"eval", path, "--checkpoint", "epoch-1", "--split", "val"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("it has average, best, epoch-3, epoch-4, last"), std::string::npos) << missing.err;
  auto escape = run({"eval", path, "--checkpoint", "../../etc/x", "--split", "val"});
  EXPECT_EQ(escape.exit_code, 1);
  EXPECT_NE(escape.err.find("not a path"), std::string::npos) << escape.err;
  auto nothing = run({"average", tmp_ + "/none.h5", "--last", "2"});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("none.h5"), std::string::npos) << nothing.err;
}

TEST_F(AverageTest, ARunThatKeptNoEpochsSaysWhichOptionKeepsThem) {
  const auto path = tmp_ + "/plain.h5";
  auto trained = run(tiny(path, {"trainer.max_epochs=1"}));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto avg = run({"average", path, "--last", "5"});
  EXPECT_EQ(avg.exit_code, 1);
  EXPECT_NE(avg.err.find("kept no epoch checkpoints"), std::string::npos) << avg.err;
  EXPECT_NE(avg.err.find("trainer.keep_checkpoints: 5"), std::string::npos) << avg.err;
  EXPECT_FALSE(fs::exists(train::checkpoint_dir(path) + "/average.pt"));

  auto contradiction = run(tiny(tmp_ + "/never.h5", {"trainer.keep_checkpoints=3", "trainer.checkpoints=false"}));
  EXPECT_EQ(contradiction.exit_code, 1);
  EXPECT_NE(contradiction.err.find("trainer.keep_checkpoints"), std::string::npos) << contradiction.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(AverageTest, BestByValidationBleuAndEarlyStopping) {
  const auto path = tmp_ + "/bleu.h5";
  auto trained = run(tiny(path, {"trainer.max_epochs=3", "trainer.val_bleu=true"}));
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  {
    results::ResultsReader rd(path);
    const auto bleu = rd.metric("val", "bleu");
    ASSERT_EQ(bleu.size(), 3u);
    for (double b : bleu) EXPECT_TRUE(b >= 0 && b <= 100) << b;
    EXPECT_GT(bleu.back(), 0.0) << "three epochs of a copy task translate something";
    // best_by stays loss: best.pt is the lowest val/loss.
    const auto loss = rd.metric("val", "loss");
    const auto best = train::read_training_state(train::checkpoint_dir(path) + "/best.pt");
    EXPECT_DOUBLE_EQ(best.best_metric, *std::min_element(loss.begin(), loss.end()));
  }

  // lr 0: nothing improves after the first epoch, so patience 2 stops after epoch 3 of 10, and
  // best.pt is epoch 1's, chosen by BLEU (its best_metric is -BLEU).
  const auto stopped = tmp_ + "/stopped.h5";
  auto early =
      run(tiny(stopped, {"trainer.max_epochs=10", "trainer.lr=0", "trainer.best_by=bleu", "trainer.patience=2"}));
  ASSERT_EQ(early.exit_code, 0) << early.out << early.err;
  EXPECT_NE(early.out.find("stopping early after epoch 3: val/bleu has not improved for 2 epochs"), std::string::npos)
      << early.out;
  EXPECT_NE(early.out.find("val BLEU "), std::string::npos) << early.out;
  {
    results::ResultsReader rd(stopped);
    EXPECT_EQ(rd.attr_string("status"), "completed");
    EXPECT_EQ(rd.metric("train", "loss").size(), 3u);
    EXPECT_EQ(rd.metric("val", "bleu").size(), 3u);
    EXPECT_EQ(rd.attr_int("stopped_early_after_epoch"), 3);
    const auto best = train::read_training_state(train::checkpoint_dir(stopped) + "/best.pt");
    EXPECT_EQ(best.best_epoch, 1);
    EXPECT_DOUBLE_EQ(best.best_metric, -rd.metric("val", "bleu")[0]);
  }

  // A run that patience stopped trains on when resumed with more patience: epochs 4 and 5, and no
  // stale stopped_early_after_epoch; stopped again, it says when.
  auto more = run({"experiments/tests/tiny_synthetic.yaml", "--resume", stopped, "trainer.max_epochs=5", "trainer.lr=0",
                   "trainer.best_by=bleu", "trainer.patience=0"});
  ASSERT_EQ(more.exit_code, 0) << more.out << more.err;
  EXPECT_NE(more.out.find("resuming after epoch 3"), std::string::npos) << more.out;
  {
    results::ResultsReader again(stopped);
    EXPECT_EQ(again.attr_string("status"), "completed");
    EXPECT_EQ(again.metric("train", "loss").size(), 5u);
    EXPECT_FALSE(again.has_attr("stopped_early_after_epoch"));
  }
  auto once_more = run({"experiments/tests/tiny_synthetic.yaml", "--resume", stopped, "trainer.max_epochs=10",
                        "trainer.lr=0", "trainer.best_by=bleu", "trainer.patience=5"});
  ASSERT_EQ(once_more.exit_code, 0) << once_more.out << once_more.err;
  results::ResultsReader third(stopped);
  EXPECT_EQ(third.metric("train", "loss").size(), 6u);
  EXPECT_EQ(third.attr_int("stopped_early_after_epoch"), 6);

  auto no_val = run(tiny(tmp_ + "/never.h5", {"trainer.best_by=bleu", "trainer.validate=false"}));
  EXPECT_EQ(no_val.exit_code, 1);
  EXPECT_NE(no_val.err.find("best_by: bleu is a validation metric, but validate: false"), std::string::npos)
      << no_val.err;
  auto typo = run(tiny(tmp_ + "/never.h5", {"trainer.best_by=blue"}));
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_NE(typo.err.find("trainer.best_by"), std::string::npos) << typo.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

// `runner eval A.h5 --ensemble B.h5[:CHECKPOINT]`: the runs decode together, each step taking the
// mean of their next-token probabilities (beam_search_test.cpp checks the arithmetic).
TEST_F(AverageTest, EvalDecodesWithAnEnsembleOfRuns) {
  const auto a = tmp_ + "/a.h5", b = tmp_ + "/b.h5", other = tmp_ + "/other.h5";
  ASSERT_EQ(run(tiny(a, {"trainer.max_epochs=2"})).exit_code, 0);
  ASSERT_EQ(run(tiny(b, {"trainer.max_epochs=2", "seed=1"})).exit_code, 0);
  ASSERT_EQ(run(tiny(other, {"trainer.max_epochs=1", "dataset.vocab_size=20"})).exit_code, 0);

  ASSERT_EQ(run({"eval", a, "--split", "test", "-q"}).exit_code, 0);
  // A run with itself is the run: the mean of two equal distributions is that distribution.
  auto twice = run({"eval", a, "--split", "test", "--ensemble", a});
  ASSERT_EQ(twice.exit_code, 0) << twice.out << twice.err;
  EXPECT_NE(twice.out.find("test ensemble of 2, greedy: BLEU = "), std::string::npos) << twice.out;
  EXPECT_NE((twice.out + twice.err).find("an ensemble of 2 models"), std::string::npos) << twice.out << twice.err;
  auto pair = run({"eval", a, "--split", "test", "--beam", "2", "--ensemble", b + ":last", "-q"});
  ASSERT_EQ(pair.exit_code, 0) << pair.out << pair.err;
  {
    results::ResultsReader rd(a);
    EXPECT_EQ(rd.strings("eval/test_ensemble2/hypotheses"), rd.strings("eval/test/hypotheses"));
    EXPECT_EQ(rd.attr_double_at("eval/test_ensemble2", "bleu"), rd.attr_double_at("eval/test", "bleu"));
    EXPECT_EQ(rd.attr_string_at("eval/test_ensemble2", "ensemble"), a + ":best");
    EXPECT_EQ(rd.attr_double_at("eval/test", "ensemble_size"), 1.0);
    EXPECT_EQ(rd.attr_double_at("eval/test_ensemble2", "ensemble_size"), 2.0);
    const auto params = rd.attr_double("num_parameters");
    EXPECT_EQ(rd.attr_double_at("eval/test_ensemble2", "ensemble_parameters"), 2 * params);
    EXPECT_EQ(rd.attr_string_at("eval/test_beam2_ensemble2", "ensemble"), b + ":last");
    EXPECT_EQ(rd.strings("eval/test_beam2_ensemble2/hypotheses").size(), 48u);
    EXPECT_EQ(rd.attr_string_at("eval/test_beam2_ensemble2", "decoding"), "beam");
  }

  // Bad members: one error each naming the member and what is wrong, nothing written.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ensemble", tmp_ + "/none.h5"}, "--ensemble " + tmp_ + "/none.h5: no such results file"},
      {{"--ensemble", b + ":epoch-9"}, "no checkpoint " + train::checkpoint_dir(b) + "/epoch-9.pt"},
      {{"--ensemble", b + ":../x"}, "not a path"},
      {{"--ensemble", "README.md"}, "not an attnlab results file: README.md"},
      {{"--ensemble", other}, "its vocabularies have 20 source and 20 target tokens, the run's 16 and 16"},
  };
  for (const auto& [extra, want] : cases) {
    std::vector<std::string> args{"eval", a, "--split", "val", "--name", "bad"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << want;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    results::ResultsReader rd(a);
    EXPECT_FALSE(rd.has("eval/bad")) << want;
  }
}

}  // namespace
