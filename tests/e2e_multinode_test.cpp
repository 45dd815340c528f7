// torchrun across nodes (issue 42): two torchrun agents on this machine as two nodes (c10d
// rendezvous, one rank each), a node killed whole, and scripts/slurm/attnlab.sbatch under stand-ins
// for Slurm. The one-node tests are in e2e_distributed_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <attnlab/results/reader.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/distributed.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {

using namespace attnlab;
using testutil::contains;
using testutil::Distributed;
using testutil::expect_two_ranks_equal_one;
using testutil::kOverrides;
namespace fs = std::filesystem;

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

// scontrol's own errors are several lines; the script says them in one (the command, its exit
// status, the lines joined) and starts nothing. A stand-in scontrol prints two lines and exits 1.
TEST_F(Distributed, TheSlurmScriptSaysAFailedScontrolInOneLine) {
  const auto bin = tmp_ + "/scontrol-bin";
  fs::create_directories(bin);
  std::ofstream(bin + "/scontrol") << "#!/usr/bin/env bash\necho 'scontrol: error: Invalid node name specified' >&2\n"
                                      "echo 'scontrol: error: Unable to resolve node[1-2]' >&2\nexit 1\n";
  fs::permissions(bin + "/scontrol", fs::perms::owner_all);
  testutil::ScopedEnv p("PATH", bin + ":" + testutil::env_or("PATH", "/usr/bin:/bin")),
      list("SLURM_JOB_NODELIST", "node[1-2]"), tr("TORCHRUN", torchrun_.c_str()), rn("RUNNER", runner_.c_str());
  const auto r = testutil::run_process(
      "/bin/bash", {source_ + "/scripts/slurm/attnlab.sbatch", "experiments/tests/tiny_synthetic.yaml"}, source_, tmp_);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "attnlab.sbatch: scontrol show hostnames node[1-2] failed (exit 1): Invalid node name specified; "
                   "Unable to resolve node[1-2]\n");
}

}  // namespace
