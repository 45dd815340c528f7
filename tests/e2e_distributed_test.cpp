// Data-parallel training under torchrun (issue 14): the real runner, two processes on localhost,
// Gloo. torchrun is the one the torch wheel installs into the suite's venv.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <attnlab/results/reader.hpp>
#include <fmt/format.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "testing/distributed.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
using testutil::Distributed;
using testutil::expect_same_losses;
using testutil::expect_same_series;
using testutil::contains;
using testutil::kOverrides;
namespace fs = std::filesystem;

TEST_F(Distributed, TwoRanksTakeTheStepsOfOneProcessWithTheWholeBatch) {
  ASSERT_NO_FATAL_FAILURE(train_one_and_two("experiments/tests/tiny_synthetic.yaml", kOverrides));
  const auto& pair = pair_;
  const auto& two = two_;
  EXPECT_TRUE(contains(pair.out + pair.err, "data-parallel: 2 processes (gloo)")) << pair.out << pair.err;

  results::ResultsReader a(one_), b(two_);
  EXPECT_EQ(b.attr_string("distributed_backend"), "gloo");
  EXPECT_EQ(a.attr_int("distributed_world_size"), 1);
  // The same global batches, the same averaged gradients, the same steps: every epoch's train and
  // validation loss (the latter a function of the weights after the epoch) agree.
  expect_same_losses(b, a, 2);
  // How the all-reduce went, from PyTorch's DDP logger: 8 steps per epoch, the first one untimed;
  // every fp32 gradient all-reduced each step, in 32 / 2 rows per rank.
  EXPECT_EQ(b.attr_int("distributed_rows_per_rank"), 16);
  EXPECT_EQ(b.attr_int("distributed_steps_timed"), 15);
  EXPECT_EQ(b.attr_int("distributed_gradient_bytes"), 4 * b.attr_int("num_parameters"));
  EXPECT_GE(b.attr_int("distributed_buckets"), 1);
  const double backward = b.attr_double("distributed_backward_seconds");
  const double all_reduce = b.attr_double("distributed_all_reduce_seconds");
  const double overlap = b.attr_double("distributed_overlap_seconds");
  EXPECT_GT(backward, 0);
  EXPECT_GT(all_reduce, 0);
  EXPECT_GE(overlap, 0);
  EXPECT_LE(overlap, all_reduce);
  EXPECT_TRUE(contains(pair.out + pair.err, "all-reduce: ")) << pair.out << pair.err;
  // One file, one checkpoint folder: rank 1 wrote nothing.
  EXPECT_TRUE(fs::exists(two + ".ckpt/last.pt"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp_)) files += e.path().extension() == ".h5" ? 1 : 0;
  EXPECT_EQ(files, 2);
}

// Every trainer trains data-parallel through the one epoch loop (train/epoch_loop.hpp): two ranks,
// each on half of every global batch, take the steps of one process with the whole batch. Dropout
// is off, as above.

// regression (Step-by-Step's corners, norm first): the mean of the batch MSEs, validation run whole
// by every rank.
TEST_F(Distributed, TheRegressionTrainerTwoRanksEqualOneProcess) {
  ASSERT_NO_FATAL_FAILURE(train_one_and_two("experiments/corners_norm_first.yaml",
                                            {"trainer.max_epochs=3", "dataset.n=64", "dataset.test_n=32",
                                             "model.dropout=0", "model.ffn_dropout=0"}));
  results::ResultsReader a(one_), b(two_);
  EXPECT_EQ(b.attr_int("distributed_rows_per_rank"), 8);  // batches of 16
  expect_same_series(b, a, {"train/loss", "val/loss", "val/batch_loss_eval_mode", "val/batch_loss_train_mode"}, 3);
  expect_same_series(b, a, {"test/loss"}, 1);  // the trained model's test predictions
  EXPECT_FALSE(fs::exists(two_ + ".ckpt"));  // checkpoints stay off unless asked, with any number of ranks
}

// seq2seq_d2l017: the book's per-sequence loss summed over the batch, on the synthetic tokens. At
// its lr 0.005 from the first step (no warmup), Adam moves a parameter whose gradient is rounding
// noise by about lr in the noise's direction, so the sums' different rounding in two ranks grows
// to 5e-5 in the loss by epoch 2; lr 0.0005 keeps the two runs within 1e-7.
TEST_F(Distributed, TheD2l017TrainerTwoRanksEqualOneProcess) {
  ASSERT_NO_FATAL_FAILURE(train_one_and_two("experiments/tests/tiny_synthetic.yaml",
                                            {"model.encoder.dropout=0", "model.decoder.dropout=0",
                                             "dataset.num_train=256",
                                             "trainer={plugin: seq2seq_d2l017, max_epochs: 2, lr: 0.0005}"}));
  results::ResultsReader a(one_), b(two_);
  expect_same_series(b, a, {"train/loss", "train/token_loss"}, 2);
}

// lm (the decoder-only gpt on the text dataset): steps reported every eval_every, each global batch
// of 8 blocks split 4 + 4, validation sharded over the ranks.
TEST_F(Distributed, TheLmTrainerTwoRanksEqualOneProcess) {
  REQUIRE_FRA_ENG();
  ASSERT_NO_FATAL_FAILURE(train_one_and_two("experiments/tests/tiny_lm.yaml",
                                            {"model.dropout=0", "trainer.max_steps=20", "data_dir=" + data_dir_}));
  results::ResultsReader a(one_), b(two_);
  EXPECT_EQ(b.attr_int("distributed_rows_per_rank"), 4);
  expect_same_series(b, a, {"train/loss", "val/loss", "val/accuracy", "train/step"}, 2);
}

// nadaraya_watson: one full-batch SGD step per epoch, each rank predicting half of the training
// points from all the others; the loss (before the step), w (after it) and the test MSE agree.
TEST_F(Distributed, TheNadarayaWatsonTrainerTwoRanksEqualOneProcess) {
  ASSERT_NO_FATAL_FAILURE(train_one_and_two("experiments/nadaraya_watson.yaml", {}));
  results::ResultsReader a(one_), b(two_);
  EXPECT_EQ(b.attr_int("distributed_rows_per_rank"), 25);
  expect_same_series(b, a, {"train/loss", "train/w", "test/mse"}, 5);
  EXPECT_NEAR(b.attr_double("kernel_w"), a.attr_double("kernel_w"), 1e-5 * std::abs(a.attr_double("kernel_w")));
}

// torchrun --max-restarts: rank 1 of the first attempt dies after epoch 2; the agent stops rank 0
// and starts both again, and the new attempt continues the same file from its last checkpoint.
TEST_F(Distributed, ATorchrunRestartResumesFromTheLastCheckpoint) {
  const auto one = tmp_ + "/one.h5", two = tmp_ + "/two.h5";
  const auto more = std::vector<std::string>{"trainer.max_epochs=4"};
  auto single =
      run(with(with({"experiments/tests/tiny_synthetic.yaml", "--results", one, "--quiet"}, kOverrides), more));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  testutil::ScopedEnv die("ATTNLAB_TEST_RANK_EXIT_AT_EPOCH", "2");
  std::vector<std::string> a = {"--standalone",
                                "--nnodes=1",
                                "--nproc_per_node=2",
                                "--max-restarts=1",
                                "--no-python",
                                runner_,
                                "experiments/tests/tiny_synthetic.yaml",
                                "--results",
                                two};
  a = with(with(a, kOverrides), more);
  auto r = testutil::run_process(torchrun_, a, source_, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "torchrun restart 1: resuming " + two)) << r.out << r.err;
  results::ResultsReader b(two), c(one);
  EXPECT_EQ(b.attr_string("status"), "completed");
  EXPECT_EQ(b.attr_int("torchrun_restart_count"), 1);
  EXPECT_EQ(b.attr_int("distributed_weights_agree"), 1);
  // The epochs before the failure are kept, those after it trained once: 4 rows, and the same
  // numbers as one uninterrupted process.
  expect_same_losses(b, c, 4);
}

// `--resume RUN.h5` given by hand to a distributed run: 2 epochs, then 2 more, equal to 4 in one go.
TEST_F(Distributed, ResumeContinuesADistributedRun) {
  const auto one = tmp_ + "/one.h5", two = tmp_ + "/two.h5";
  auto single = run(with({"experiments/tests/tiny_synthetic.yaml", "--results", one, "--quiet"},
                         with(kOverrides, {"trainer.max_epochs=4"})));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  auto first = torchrun_runner(2, with({"experiments/tests/tiny_synthetic.yaml", "--results", two}, kOverrides));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto rest = torchrun_runner(
      2, with({"experiments/tests/tiny_synthetic.yaml", "--resume", two}, with(kOverrides, {"trainer.max_epochs=4"})));
  ASSERT_EQ(rest.exit_code, 0) << rest.out << rest.err;
  results::ResultsReader b(two), c(one);
  EXPECT_EQ(b.attr_string("status"), "completed");
  EXPECT_EQ(b.attr_int("distributed_world_size"), 2);
  EXPECT_EQ(b.attr_int("distributed_weights_agree"), 1);
  EXPECT_TRUE(contains(b.attr_string("resume_command_line"), "--resume")) << b.attr_string("resume_command_line");
  expect_same_losses(b, c, 4);
}

TEST_F(Distributed, AKilledRankEndsTheOtherWithAnErrorAndTheRunFailed) {
  // Two runners launched by hand with torchrun's variables (rank 0 serves the store), so that no
  // agent stops the survivor: attnlab's own fault handling is what is tested.
  const auto path = tmp_ + "/run.h5";
  const int port = testutil::free_port();
  auto launch = [&](int rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("ATTNLAB_DISTRIBUTED_TIMEOUT", "20", 1);
      if (::chdir(source_.c_str()) != 0) ::_exit(127);
      const auto log = fmt::format("{}/rank{}.log", tmp_, rank);
      if (!std::freopen(log.c_str(), "w", stdout) || !std::freopen(log.c_str(), "a", stderr)) ::_exit(127);
      std::vector<std::string> args = {runner_, "experiments/tests/tiny_synthetic.yaml", "--results", path,
                                       "trainer.max_epochs=200"};
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(runner_.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  };
  const pid_t rank0 = launch(0), rank1 = launch(1);
  // Training has begun once rank 0's file says an epoch is done: kill rank 1 then, mid-run.
  const auto started = std::chrono::steady_clock::now();
  bool training = false;
  while (!training && std::chrono::steady_clock::now() - started < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    training = contains(testutil::read_file(tmp_ + "/rank0.log"), "epoch   1/200");
  }
  ASSERT_TRUE(training) << testutil::read_file(tmp_ + "/rank0.log") << testutil::read_file(tmp_ + "/rank1.log");
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  int status = 0;
  ::waitpid(rank1, &status, 0);
  const auto killed = std::chrono::steady_clock::now();
  pid_t done = 0;
  while ((done = ::waitpid(rank0, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(rank0, SIGKILL);
    ::waitpid(rank0, &status, 0);
    FAIL() << "rank 0 still ran 60 s after rank 1 died\n" << testutil::read_file(tmp_ + "/rank0.log");
  }
  const auto log = testutil::read_file(tmp_ + "/rank0.log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  results::ResultsReader r(path);
  EXPECT_EQ(r.attr_string("status"), "failed") << log;
  const auto error = r.attr_string("error");
  EXPECT_TRUE(error.starts_with("distributed run: rank 0 of 2 stopped in training: ")) << error;
  EXPECT_TRUE(contains(error, "(a collective with the other ranks failed: one of them died or failed")) << error;
  EXPECT_TRUE(contains(log, "error: distributed run: rank 0 of 2 stopped in training")) << log;
}

// A rank that cannot join says so in one line (no c10d warnings or backtraces) within the
// distributed timeout: a MASTER_ADDR that does not resolve at once, a port nobody listens on when
// the bound has passed (c10d alone retried past it, with a random backoff).
TEST_F(Distributed, AFailedJoinIsOneLineWithinTheTimeout) {
  const int port = testutil::free_port();
  for (const auto& [addr, want] : std::vector<std::pair<std::string, std::string>>{
           {"host.invalid", "MASTER_ADDR 'host.invalid' does not resolve"},
           {"127.0.0.1", fmt::format("could not join the process group within 4 s: nothing accepted a connection at "
                                     "127.0.0.1:{}", port)}}) {
    testutil::ScopedEnv a("MASTER_ADDR", addr.c_str()), p("MASTER_PORT", std::to_string(port).c_str()),
        w("WORLD_SIZE", "2"), r("RANK", "1"), t("ATTNLAB_DISTRIBUTED_TIMEOUT", "4");
    const auto started = std::chrono::steady_clock::now();
    const auto out = run({"experiments/tests/tiny_synthetic.yaml", "--results", tmp_ + "/join.h5"});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(out.exit_code, 1) << out.err;
    EXPECT_TRUE(contains(out.err, want)) << out.err;
    EXPECT_EQ(testutil::count_lines(out.out + out.err), 1u) << out.out << out.err;
    EXPECT_LT(seconds, 4.0 + 3.0) << "the join took " << seconds << " s against a bound of 4 s";
    EXPECT_FALSE(fs::exists(tmp_ + "/join.h5"));
  }
}

TEST_F(Distributed, BadEnvironmentsAndTrainersThatCannotShareAreOneLineErrors) {
  struct Case {
    std::vector<std::pair<const char*, const char*>> env;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}},
       "RANK=2 is not this process's rank: expected a whole number from 0 to 1"},
      {{{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "29500"}}, "MASTER_ADDR is not set"},
      {{{"WORLD_SIZE", "two"}}, "WORLD_SIZE=two is not the number of processes"},
      {{{"WORLD_SIZE", "2"},
        {"RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"ATTNLAB_DISTRIBUTED_TIMEOUT", "0.5"}},
       "ATTNLAB_DISTRIBUTED_TIMEOUT: expected seconds from 1 to 86400, found '0.5'"},
  };
  for (const auto& c : cases) {
    std::vector<std::unique_ptr<testutil::ScopedEnv>> env;
    for (const auto& [k, v] : c.env) env.push_back(std::make_unique<testutil::ScopedEnv>(k, v));
    const auto r = run({"experiments/tests/tiny_synthetic.yaml", "--results", tmp_ + "/bad.h5"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, c.want)) << r.err;
    EXPECT_FALSE(fs::exists(tmp_ + "/bad.h5"));
  }
  // A trainer without data-parallel support (every trainer of the tree has it through the epoch
  // loop; this test plugin, written as an out-of-tree trainer might be, does not) refuses two
  // processes before anything is written.
  const std::string plugins = testutil::env_or("ATTNLAB_TEST_PLUGIN_DIR", "");
  ASSERT_FALSE(plugins.empty()) << "ATTNLAB_TEST_PLUGIN_DIR is not set (run through ctest)";
  const auto r = torchrun_runner(2, {"--plugin-path", plugins + "/attnlab_trainer_test_reporting",
                                     "experiments/tests/tiny_synthetic.yaml", "--results", tmp_ + "/c.h5",
                                     "trainer={plugin: test_reporting, max_epochs: 1}"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out + r.err, "trainer 'test_reporting' does not train data-parallel")) << r.out << r.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/c.h5"));
  // One process under torchrun is one process: any trainer runs, nothing is joined.
  const auto alone =
      torchrun_runner(1, {"experiments/corners_norm_first.yaml", "--results", tmp_ + "/c1.h5", "trainer.max_epochs=1"});
  EXPECT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  EXPECT_FALSE(contains(alone.out + alone.err, "data-parallel")) << alone.out << alone.err;
  EXPECT_EQ(results::ResultsReader(tmp_ + "/c1.h5").attr_int("distributed_world_size"), 1);
}

}  // namespace
