// End to end with the real runner on data-free configs: checkpoints and bit-exact resume after
// kill -9, `runner eval` (greedy and beam, sacreBLEU-exact scores stored under /eval), and
// `runner summary` on the TF-lab transformer.
#include <attnlab/metrics/sacrebleu.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class ResumeTest : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-resume"; }

  /// Starts the runner, calls `watch(pid)` while it runs, then reaps it.
  testutil::ProcessResult run_watched(const std::vector<std::string>& args, const std::function<void(pid_t)>& watch) {
    return run(args, [&](pid_t pid, const std::string&) { watch(pid); });
  }

  std::vector<std::string> tiny(const std::string& results, std::vector<std::string> extra = {}) {
    return testutil::tiny_synthetic(results, std::move(extra));
  }

  static void expect_same_run(const std::string& a, const std::string& b) {
    results::ResultsReader ra(a), rb(b);
    EXPECT_EQ(rb.attr_string("status"), "completed");
    // Exact equality: the resumed run must compute the same numbers, not nearly the same.
    const std::vector<std::pair<std::string, std::string>> series = {
        {"train", "loss"}, {"val", "loss"}, {"step", "lr"}, {"epoch", "index"}};
    for (const auto& [group, name] : series) {
      auto sa = ra.metric(group, name), sb = rb.metric(group, name);
      EXPECT_EQ(sa, sb) << group << "/" << name;
    }
    EXPECT_EQ(ra.metric("train", "loss").size(), 4u);
    EXPECT_EQ(rb.metric("train", "seconds").size(), 4u);
    auto ta = train::checkpoint_tensors(train::checkpoint_dir(a) + "/last.pt");
    auto tb = train::checkpoint_tensors(train::checkpoint_dir(b) + "/last.pt");
    ASSERT_EQ(ta.size(), tb.size());
    ASSERT_GT(ta.size(), 10u);
    for (const auto& [key, t] : ta) {
      ASSERT_TRUE(tb.count(key)) << key;
      EXPECT_TRUE(torch::equal(t, tb.at(key))) << key << " differs";
    }
    auto sa = train::read_training_state(train::checkpoint_dir(a) + "/last.pt");
    auto sb = train::read_training_state(train::checkpoint_dir(b) + "/last.pt");
    EXPECT_EQ(sa.epoch, 4);
    EXPECT_EQ(sb.step, sa.step);
    EXPECT_EQ(sb.best_metric, sa.best_metric);
    EXPECT_EQ(sb.best_epoch, sa.best_epoch);
    EXPECT_EQ(sb.metric_rows, sa.metric_rows);
  }
};

TEST_F(ResumeTest, KillNineDuringEpochThreeThenResumeIsBitIdentical) {
  const auto whole = tmp_ + "/whole.h5", cut = tmp_ + "/cut.h5";
  const std::string longer = "dataset.num_train=4096";  // 128 steps an epoch: time to land in epoch 3
  auto r = run(tiny(whole, {longer}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(train::checkpoint_dir(whole) + "/best.pt"));

  const auto last = train::checkpoint_dir(cut) + "/last.pt";
  int64_t killed_after = -1;
  auto killed = run_watched(tiny(cut, {longer}), [&](pid_t pid) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(last)) {
        try {
          if (train::read_training_state(last).epoch >= 2) break;
        } catch (const std::exception&) {  // between write and rename: try again
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(pid, SIGKILL);
  });
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.out << killed.err;
  killed_after = train::read_training_state(last).epoch;
  EXPECT_EQ(killed_after, 2) << "the kill should land in epoch 3";
  {
    results::ResultsReader rd(cut);
    EXPECT_EQ(rd.attr_string("status"), "running");  // died without saying so
  }

  auto resumed = run(tiny(cut, {longer, "--resume", cut}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("epoch " + std::to_string(killed_after + 1) + "/4"), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("epoch 1/4"), std::string::npos) << resumed.out;
  expect_same_run(whole, cut);
  results::ResultsReader rd(cut);
  EXPECT_FALSE(rd.attr_string("resume_command_line").empty());
  EXPECT_FALSE(rd.has_attr("error"));
}

TEST_F(ResumeTest, ExtendingACompletedRunEqualsTrainingLongerAtOnce) {
  const auto whole = tmp_ + "/whole.h5", two = tmp_ + "/two.h5";
  ASSERT_EQ(run(tiny(whole)).exit_code, 0);
  auto r = run(tiny(two, {"trainer.max_epochs=2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto resumed = run(tiny(two, {"--resume", two}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("differs from the stored one"), std::string::npos) << resumed.out;
  expect_same_run(whole, two);
}

// The trainers that gained checkpoints with the epoch loop (train/epoch_loop.hpp) resume as exactly
// as seq2seq: the corner regression (dropout on) and the parametric Nadaraya-Watson kernel, each 2
// epochs then resumed to 4, equal to 4 at once; without `checkpoints: true` they write none.
TEST_F(ResumeTest, TheRegressionAndKernelTrainersResumeBitIdenticalWhenAskedToCheckpoint) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"experiments/tests/tiny_corners.yaml", {"val/loss", "val/batch_loss_train_mode", "test/loss"}},
      {"experiments/nadaraya_watson.yaml", {"train/w", "test/mse"}}};
  for (const auto& [experiment, more] : runs) {
    const auto stem = tmp_ + "/" + fs::path(experiment).stem().string();
    const auto whole = stem + "-whole.h5", two = stem + "-two.h5", none = stem + "-none.h5";
    const auto go = [&](const std::string& results, std::vector<std::string> extra) {
      std::vector<std::string> args = {experiment, "--results", results, "-q", "trainer.checkpoints=true"};
      args.insert(args.end(), extra.begin(), extra.end());
      const auto r = run(args);
      EXPECT_EQ(r.exit_code, 0) << experiment << "\n" << r.out << r.err;
    };
    go(whole, {"trainer.max_epochs=4"});
    go(two, {"trainer.max_epochs=2"});
    go(two, {"trainer.max_epochs=4", "--resume", two});
    results::ResultsReader ra(whole), rb(two);
    EXPECT_EQ(rb.attr_string("status"), "completed") << experiment;
    std::vector<std::string> series = {"train/loss", "epoch/index"};
    series.insert(series.end(), more.begin(), more.end());
    for (const auto& gn : series) {
      const auto slash = gn.find('/');
      const auto group = gn.substr(0, slash), name = gn.substr(slash + 1);
      EXPECT_EQ(ra.metric(group, name), rb.metric(group, name)) << experiment << " " << gn;
    }
    EXPECT_EQ(rb.metric("train", "loss").size(), 4u) << experiment;
    EXPECT_EQ(train::read_training_state(train::checkpoint_dir(two) + "/last.pt").epoch, 4) << experiment;
    ASSERT_EQ(run({experiment, "--results", none, "-q", "trainer.max_epochs=1"}).exit_code, 0) << experiment;
    EXPECT_FALSE(fs::exists(train::checkpoint_dir(none))) << experiment;
  }
}

TEST_F(ResumeTest, ResumingSetsAsideEvaluationsOfTheReplacedCheckpoints) {
  const auto path = tmp_ + "/scored.h5";
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=2"})).exit_code, 0);
  ASSERT_EQ(run({"eval", path, "--split", "test", "-q"}).exit_code, 0);
  ASSERT_EQ(run({"eval", path, "--split", "val", "--name", "mine", "-q"}).exit_code, 0);
  double scored = 0;
  {
    results::ResultsReader rd(path);
    scored = rd.attr_double_at("eval/test", "bleu");
  }

  auto resumed = run(tiny(path, {"--resume", path}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("moved mine, test to /eval_stale"), std::string::npos) << resumed.out;
  {
    results::ResultsReader rd(path);
    EXPECT_EQ(rd.attr_string("status"), "completed");
    EXPECT_TRUE(rd.children("eval").empty()) << "an evaluation of epoch 2's checkpoint is not the run's";
    ASSERT_EQ(rd.children("eval_stale"), (std::vector<std::string>{"mine", "test"}));
    EXPECT_EQ(rd.attr_double_at("eval_stale/test", "bleu"), scored);
    EXPECT_EQ(rd.strings("eval_stale/mine/hypotheses").size(), 64u);
    EXPECT_FALSE(rd.attr_string_at("eval_stale/test", "stale_since").empty());
    EXPECT_NE(rd.attr_string_at("eval_stale/test", "stale_reason").find("resumed"), std::string::npos);
  }
  auto table = run({"compare", path});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.find("mine"), std::string::npos) << "compare shows only current evaluations\n" << table.out;

  // Scored again, then resumed again: the newer stale evaluation replaces the older.
  ASSERT_EQ(run({"eval", path, "--split", "test", "-q"}).exit_code, 0);
  double took = 0, took_before = 0;  // the translation's time: tells the two evaluations apart
  {
    results::ResultsReader rd(path);
    took = rd.attr_double_at("eval/test", "seconds");
    took_before = rd.attr_double_at("eval_stale/test", "seconds");
  }
  ASSERT_NE(took, took_before);
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=5", "--resume", path, "-q"})).exit_code, 0);
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.children("eval_stale"), (std::vector<std::string>{"mine", "test"}));
  EXPECT_EQ(rd.attr_double_at("eval_stale/test", "seconds"), took);
  EXPECT_TRUE(rd.children("eval").empty());
}

TEST_F(ResumeTest, ResumeRefusesWhatItCannotContinue) {
  const auto path = tmp_ + "/nockpt.h5";
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=1", "trainer.checkpoints=false"})).exit_code, 0);
  auto r = run(tiny(path, {"--resume", path}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no checkpoint"), std::string::npos) << r.err;
  auto other = run({"experiments/tests/tiny_synthetic.yaml", "experiment=renamed", "--resume", path});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("holds experiment 'tiny_synthetic'"), std::string::npos) << other.err;
  auto missing = run(tiny(tmp_ + "/absent.h5", {"--resume", tmp_ + "/absent.h5"}));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no such file"), std::string::npos) << missing.err;
}

TEST_F(ResumeTest, EvalTranslatesASplitAndStoresSacreBleu) {
  const auto path = tmp_ + "/eval.h5";
  auto trained = run(tiny(path, {"trainer.max_epochs=3", "evaluate.split=val", "evaluate.beam_size=2"}));
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  EXPECT_NE(trained.out.find("val (best checkpoint, beam 2): BLEU = "), std::string::npos) << trained.out;
  auto greedy = run({"eval", path, "--split", "test"});
  ASSERT_EQ(greedy.exit_code, 0) << greedy.out << greedy.err;
  EXPECT_NE(greedy.out.find("BLEU = "), std::string::npos) << greedy.out;
  EXPECT_NE(greedy.out.find("|case:mixed|"), std::string::npos) << greedy.out;
  EXPECT_NE(greedy.out.find(", lowercased "), std::string::npos) << greedy.out;
  auto beam = run({"eval", path, "--split", "test", "--beam", "3", "-q"});
  ASSERT_EQ(beam.exit_code, 0) << beam.out << beam.err;

  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "completed");
  for (const std::string group : {"eval/test", "eval/test_beam3"}) {
    auto hyps = rd.strings(group + "/hypotheses");
    auto refs = rd.strings(group + "/references");
    ASSERT_EQ(hyps.size(), 48u) << group;
    ASSERT_EQ(refs.size(), 48u);
    auto expected = metrics::corpus_bleu(hyps, refs);
    EXPECT_DOUBLE_EQ(rd.attr_double_at(group, "bleu"), expected.score) << group;
    EXPECT_EQ(rd.attr_string_at(group, "bleu_signature"), expected.signature);
    EXPECT_DOUBLE_EQ(rd.attr_double_at(group, "bleu_lowercase"),
                     metrics::corpus_bleu(hyps, refs, {.lowercase = true}).score)
        << group;
    EXPECT_GE(rd.attr_double_at(group, "seconds"), 0.0);
    EXPECT_EQ(rd.attr_string_at(group, "checkpoint"), "best");
  }
  EXPECT_EQ(rd.attr_string_at("eval/test", "decoding"), "greedy");
  EXPECT_EQ(rd.strings("eval/val_beam2/hypotheses").size(), 64u);
  EXPECT_EQ(rd.attr_double_at("eval/test_beam3", "beam_size"), 3.0);
  EXPECT_GT(rd.attr_double_at("eval/test", "bleu"), 1.0) << "three epochs of a copy task learn something";

  auto bad = run({"eval", path, "--split", "dev"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("train, val or test"), std::string::npos) << bad.err;
  // A beam wider than the target vocabulary held 100,000 copies of each sentence's state: out of
  // memory, or killed. Refused before decoding, in eval and (before training) in a run.
  auto wide = run({"eval", path, "--split", "test", "--beam", "100000"});
  EXPECT_EQ(wide.exit_code, 1);
  EXPECT_NE(wide.err.find("config error: --beam 100000 is more than the target vocabulary's "), std::string::npos)
      << wide.err;
  const auto never = tmp_ + "/wide.h5";
  auto run_wide = run(tiny(never, {"evaluate.split=test", "evaluate.beam_size=100000"}));
  EXPECT_EQ(run_wide.exit_code, 1);
  EXPECT_NE(run_wide.err.find("beam_size 100000 is more than the target vocabulary's "), std::string::npos)
      << run_wide.err;
  EXPECT_FALSE(fs::exists(never)) << "refused before the run began";
}

TEST_F(ResumeTest, EvalPicksTheLengthPenaltyOnValidation) {
  const auto path = tmp_ + "/tune.h5";
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=3"})).exit_code, 0);
  auto r = run({"eval", path, "--split", "test", "--beam", "3", "--tune-length-penalty", "0,1,3", "threads=1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("test beam 3 (length penalty "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", picked on val): BLEU = "), std::string::npos) << r.out;
  results::ResultsReader rd(path);
  const auto tuned = rd.attr_string_at("eval/test_beam3", "length_penalty_tuned_on_val");
  // "0: 12.34, 1: 12.50, 3: 11.00": the recorded penalty is the first of the best.
  std::vector<std::pair<double, double>> tried;
  std::istringstream in(tuned);
  for (std::string item; std::getline(in, item, ',');) {
    const auto colon = item.find(':');
    ASSERT_NE(colon, std::string::npos) << tuned;
    tried.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
  }
  ASSERT_EQ(tried.size(), 3u) << tuned;
  EXPECT_EQ(tried[0].first, 0.0);
  EXPECT_EQ(tried[2].first, 3.0);
  auto best = tried.begin();
  for (auto it = tried.begin(); it != tried.end(); ++it) {
    if (it->second > best->second) best = it;
  }
  EXPECT_EQ(rd.attr_double_at("eval/test_beam3", "length_penalty"), best->first) << tuned;
  EXPECT_EQ(rd.attr_string_at("eval/test_beam3", "split"), "test");

  auto greedy = run({"eval", path, "--tune-length-penalty", "1,2"});
  EXPECT_EQ(greedy.exit_code, 1);
  EXPECT_NE(greedy.err.find("needs beam search"), std::string::npos) << greedy.err;
  auto bad = run({"eval", path, "--beam", "2", "--tune-length-penalty", "1,x"});
  EXPECT_NE(bad.exit_code, 0);
}

TEST_F(ResumeTest, SummaryPrintsTheTfLabTransformer) {
  auto r = run({"summary", "experiments/transformer_tf_lab.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // 6 encoder blocks of 3,152,384 + embedding 14,848; 6 decoder blocks of 4,204,032 + the tied
  // embedding 14,848 (see the experiment file).
  EXPECT_NE(r.out.find("Total params: 44,168,192"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Output: [3, 11, 29] (probabilities)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 (TransformerEncoderBlock)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3,152,384"), std::string::npos) << r.out;  // one encoder block
  auto deep = run({"summary", "experiments/transformer_tf_lab.yaml", "--depth", "5"});
  EXPECT_NE(deep.out.find("W_q (PerHeadLinear)"), std::string::npos) << deep.out;
  EXPECT_NE(deep.out.find("conv1 (Conv1d)"), std::string::npos) << deep.out;
}

}  // namespace
