// Data-parallel training under torchrun (issue 14): the real runner, two processes on localhost,
// Gloo. torchrun is the one the torch wheel installs into the suite's venv.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <attnlab/results/reader.hpp>
#include <fmt/format.h>
#include <chrono>
#include <cmath>
#include <optional>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
using testutil::contains;
namespace fs = std::filesystem;

// tiny_synthetic without dropout (the ranks' dropout masks would differ from one process's), 2
// epochs of 8 global batches of 32 sequences.
const std::vector<std::string> kOverrides = {"model.encoder.dropout=0", "model.decoder.dropout=0",
                                             "trainer.max_epochs=2", "dataset.num_train=256"};

class Distributed : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-distributed"; }

  void SetUp() override {
    RunnerFixture::SetUp();
    const auto python = testutil::env_or("ATTNLAB_PYTHON", "");
    ATTNLAB_REQUIRE(!python.empty(), "ATTNLAB_PYTHON is not set (run through ctest)");
    torchrun_ = (fs::path(python).parent_path() / "torchrun").string();
    ATTNLAB_REQUIRE(fs::exists(torchrun_), "torchrun is not in the suite's venv: " + torchrun_);
    one_ = tmp_ + "/one.h5";
    two_ = tmp_ + "/two.h5";
  }

  /// `torchrun --standalone --nproc_per_node=N --no-python runner args...`
  testutil::ProcessResult torchrun_runner(int processes, const std::vector<std::string>& args) {
    std::vector<std::string> a = {"--standalone", "--nnodes=1", fmt::format("--nproc_per_node={}", processes),
                                  "--no-python", runner_};
    a.insert(a.end(), args.begin(), args.end());
    return testutil::run_process(torchrun_, a, source_, tmp_);
  }

  /// Trains `experiment` with `overrides` as one process into one_ and as two ranks under torchrun
  /// into two_ (the ranks' output in pair_); both must complete, the ranks with equal weights.
  /// Call through ASSERT_NO_FATAL_FAILURE.
  void train_one_and_two(const std::string& experiment, const std::vector<std::string>& overrides) {
    auto single = run(with({experiment, "--results", one_, "--quiet"}, overrides));
    ASSERT_EQ(single.exit_code, 0) << single.err;
    pair_ = torchrun_runner(2, with({experiment, "--results", two_}, overrides));
    ASSERT_EQ(pair_.exit_code, 0) << pair_.out << pair_.err;
    results::ResultsReader b(two_);
    EXPECT_EQ(b.attr_string("status"), "completed");
    EXPECT_EQ(b.attr_int("distributed_world_size"), 2);
    EXPECT_EQ(b.attr_int("distributed_weights_agree"), 1);
  }

  std::string torchrun_;
  std::string one_, two_;  // the one-process and the two-rank results files
  testutil::ProcessResult pair_;

  static std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
};

/// Every epoch's value of each "group/name" series of `got` equals `want`'s within 1e-5
/// (relative), and both have `epochs` rows.
void expect_same_series(const results::ResultsReader& got, const results::ResultsReader& want,
                        const std::vector<std::string>& series, size_t epochs) {
  for (const auto& gn : series) {
    const auto slash = gn.find('/');
    const auto group = gn.substr(0, slash), name = gn.substr(slash + 1);
    const auto g = got.metric(group, name), w = want.metric(group, name);
    ASSERT_EQ(g.size(), epochs) << gn;
    ASSERT_EQ(w.size(), epochs) << gn;
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_NEAR(g[i], w[i], 1e-5 * std::max(1.0, std::abs(w[i]))) << gn << " at epoch " << i + 1;
    }
  }
}

/// Every epoch's train and validation loss of `got` equals `want`'s within 1e-5 (relative).
void expect_same_losses(const results::ResultsReader& got, const results::ResultsReader& want, size_t epochs) {
  expect_same_series(got, want, {"train/loss", "val/loss"}, epochs);
}

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

/// `two` (a run of two ranks) completed, its ranks' weights agreeing, with the losses of `one` (the
/// same run as one process) for `epochs` epochs.
void expect_two_ranks_equal_one(const std::string& two, const std::string& one, size_t epochs) {
  results::ResultsReader b(two), a(one);
  EXPECT_EQ(b.attr_string("status"), "completed");
  EXPECT_EQ(b.attr_int("distributed_world_size"), 2);
  EXPECT_EQ(b.attr_int("distributed_weights_agree"), 1);
  expect_same_losses(b, a, epochs);
}

/// torchrun as node `node` of two on this machine (c10d rendezvous at 127.0.0.1:`port`, one rank
/// per node), in a process group of its own so that a test can kill the whole node; its output
/// goes to tmp/node<node>.log. Returns the agent's pid (= its process group).
pid_t launch_node(const std::string& torchrun, const std::string& runner, const std::string& source,
                  const std::string& tmp, int node, int port, const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::setenv("ATTNLAB_DISTRIBUTED_TIMEOUT", "20", 1);
    if (::chdir(source.c_str()) != 0) ::_exit(127);
    const auto log = fmt::format("{}/node{}.log", tmp, node);
    if (!std::freopen(log.c_str(), "w", stdout) || !std::freopen(log.c_str(), "a", stderr)) ::_exit(127);
    std::vector<std::string> a = {torchrun,
                                  "--nnodes=2",
                                  "--nproc_per_node=1",
                                  fmt::format("--node_rank={}", node),
                                  "--rdzv_backend=c10d",
                                  fmt::format("--rdzv_endpoint=127.0.0.1:{}", port),
                                  "--rdzv_id=attnlab-test",
                                  "--no-python",
                                  runner};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& x : a) argv.push_back(x.data());
    argv.push_back(nullptr);
    ::execv(torchrun.c_str(), argv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

/// `pid` and every process below it (from /proc: torchrun starts its workers in sessions of their
/// own, so the agent's process group does not hold them).
std::vector<pid_t> process_tree(pid_t pid) {
  std::vector<pid_t> tree = {pid};
  for (size_t i = 0; i < tree.size(); ++i) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const auto name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto stat = testutil::read_file(entry.path().string() + "/stat");
      const auto close = stat.rfind(')');  // "pid (comm) state ppid ..."
      if (close == std::string::npos) continue;
      int ppid = 0;
      if (std::sscanf(stat.c_str() + close + 1, " %*c %d", &ppid) == 1 && ppid == tree[i]) {
        tree.push_back(std::stoi(name));
      }
    }
  }
  return tree;
}

/// Waits up to `limit` for `pid`; its wait status, or nullopt (then it is killed with its group).
std::optional<int> wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto started = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - started > limit) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return status;
}

// Two torchrun agents as two nodes (--nnodes=2, c10d rendezvous, one rank each): the same steps
// as one process with the whole batch, as with two ranks on one node.
TEST_F(Distributed, TwoNodesTrainAsOneProcessWithTheWholeBatch) {
  auto single = run(with({"experiments/tests/tiny_synthetic.yaml", "--results", one_, "--quiet"}, kOverrides));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const int port = testutil::free_port();
  const auto args = with({"experiments/tests/tiny_synthetic.yaml", "--results", two_}, kOverrides);
  const pid_t node0 = launch_node(torchrun_, runner_, source_, tmp_, 0, port, args);
  const pid_t node1 = launch_node(torchrun_, runner_, source_, tmp_, 1, port, args);
  const auto s0 = wait_for(node0, std::chrono::seconds(240)), s1 = wait_for(node1, std::chrono::seconds(30));
  const auto logs = testutil::read_file(tmp_ + "/node0.log") + testutil::read_file(tmp_ + "/node1.log");
  ASSERT_TRUE(s0 && s1) << "a node did not finish\n" << logs;
  EXPECT_TRUE(WIFEXITED(*s0) && WEXITSTATUS(*s0) == 0) << logs;
  EXPECT_TRUE(WIFEXITED(*s1) && WEXITSTATUS(*s1) == 0) << logs;
  expect_two_ranks_equal_one(two_, one_, 2);
}

// A node killed mid-run (its agent and its rank, SIGKILL): the other node's rank stops with one
// error naming the failed collective, its results file says `failed` (the epochs done are kept),
// and its agent exits non-zero, within the distributed timeout's reach.
TEST_F(Distributed, AKilledNodeEndsTheOtherNodeWithAnErrorAndTheRunFailed) {
  const int port = testutil::free_port();
  const auto args = std::vector<std::string>{"experiments/tests/tiny_synthetic.yaml", "--results", two_,
                                             "trainer.max_epochs=200"};
  const pid_t node0 = launch_node(torchrun_, runner_, source_, tmp_, 0, port, args);
  const pid_t node1 = launch_node(torchrun_, runner_, source_, tmp_, 1, port, args);
  const auto started = std::chrono::steady_clock::now();
  bool training = false;
  while (!training && std::chrono::steady_clock::now() - started < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    training = contains(testutil::read_file(tmp_ + "/node0.log"), "epoch   1/200");
  }
  if (!training) {
    ::kill(-node0, SIGKILL);
    ::kill(-node1, SIGKILL);
    wait_for(node0, std::chrono::seconds(5));
    wait_for(node1, std::chrono::seconds(5));
    FAIL() << "no epoch in 120 s\n" << testutil::read_file(tmp_ + "/node0.log") << testutil::read_file(tmp_ + "/node1.log");
  }
  // The whole node at once: its agent and its rank, as a machine that goes down.
  const auto tree = process_tree(node1);
  ASSERT_GE(tree.size(), 2u) << "node 1's rank was not found under its agent";
  for (const pid_t p : tree) ::kill(p, SIGKILL);
  wait_for(node1, std::chrono::seconds(10));
  const auto s0 = wait_for(node0, std::chrono::seconds(90));
  const auto log = testutil::read_file(tmp_ + "/node0.log");
  ASSERT_TRUE(s0) << "node 0 still ran 90 s after node 1 was killed\n" << log;
  EXPECT_TRUE(WIFEXITED(*s0) && WEXITSTATUS(*s0) != 0) << log;
  results::ResultsReader r(two_);
  EXPECT_EQ(r.attr_string("status"), "failed") << log;
  EXPECT_TRUE(r.attr_string("error").starts_with("distributed run: rank 0 of 2 stopped in training: "))
      << r.attr_string("error");
  EXPECT_GE(r.metric("train", "loss").size(), 1u);
  EXPECT_TRUE(contains(log, "error: distributed run: rank 0 of 2 stopped in training")) << log;
}

// scripts/slurm/attnlab.sbatch under a stand-in for Slurm: `srun` starts the script's command once
// per "node" (SLURM_NNODES = 2) on this machine and `scontrol show hostnames` names 127.0.0.1 as the
// first node. What is tested is the script: one torchrun per node, meeting at the first node, the
// runner and its arguments passed through; the run equals one process with the whole batch.
TEST_F(Distributed, TheSlurmScriptRunsOneAgentPerNode) {
  auto single = run(with({"experiments/tests/tiny_synthetic.yaml", "--results", one_, "--quiet"}, kOverrides));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto bin = tmp_ + "/slurm-bin";
  fs::create_directories(bin);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(bin + "/" + name) << text;
    fs::permissions(bin + "/" + name, fs::perms::owner_all);
  };
  // srun: every option before the command is Slurm's; start the command SLURM_NNODES times.
  write("srun", "#!/usr/bin/env bash\n"
                "while [ \"${1#-}\" != \"$1\" ]; do echo \"srun option: $1\" >> \"$SRUN_LOG\"; shift; done\n"
                "pids=()\n"
                "for i in $(seq 1 \"$SLURM_NNODES\"); do \"$@\" & pids+=($!); done\n"
                "rc=0; for p in \"${pids[@]}\"; do wait \"$p\" || rc=$?; done; exit $rc\n");
  // A long node list, as a large allocation gives: reading only its first line must not kill the
  // script with SIGPIPE (pipefail).
  write("scontrol",
        "#!/usr/bin/env bash\n[ \"$1 $2\" = \"show hostnames\" ] && echo 127.0.0.1 && seq -f 'node%g' 2 20000\n");
  const std::string path = bin + ":" + testutil::env_or("PATH", "/usr/bin:/bin");
  const int port = testutil::free_port();
  testutil::ScopedEnv p("PATH", path.c_str()), nodes("SLURM_NNODES", "2"), list("SLURM_JOB_NODELIST", "node[1-2]"),
      job("SLURM_JOB_ID", "7"), rdzv("ATTNLAB_RDZV_PORT", std::to_string(port).c_str()),
      tr("TORCHRUN", torchrun_.c_str()), rn("RUNNER", runner_.c_str()),
      log("SRUN_LOG", (tmp_ + "/srun.log").c_str()), t("ATTNLAB_DISTRIBUTED_TIMEOUT", "60");
  const auto r = testutil::run_process(
      "/bin/bash", with({source_ + "/scripts/slurm/attnlab.sbatch", "experiments/tests/tiny_synthetic.yaml", "--results",
                         two_}, kOverrides),
      source_, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(testutil::read_file(tmp_ + "/srun.log"), "srun option: --kill-on-bad-exit=1"));
  expect_two_ranks_equal_one(two_, one_, 2);
  // Outside an allocation, or without a command: what is missing, and no run.
  testutil::ScopedEnv none("SLURM_JOB_NODELIST", std::nullopt);
  const auto outside = testutil::run_process(
      "/bin/bash", {source_ + "/scripts/slurm/attnlab.sbatch", "experiments/tests/tiny_synthetic.yaml"}, source_, tmp_);
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_TRUE(contains(outside.err, "not inside a Slurm allocation")) << outside.err;
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
