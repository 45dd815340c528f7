#pragma once
// What the torchrun tests share (tests/e2e_distributed_test.cpp: one node; e2e_multinode_test.cpp:
// two nodes and Slurm): the suite venv's torchrun, a one-process and a two-rank results file, and
// the comparisons of their series.
#include <gtest/gtest.h>

#include <attnlab/results/reader.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace attnlab::testutil {

// tiny_synthetic without dropout (the ranks' dropout masks would differ from one process's), 2
// epochs of 8 global batches of 32 sequences.
inline const std::vector<std::string> kOverrides = {"model.encoder.dropout=0", "model.decoder.dropout=0",
                                             "trainer.max_epochs=2", "dataset.num_train=256"};

class Distributed : public RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-distributed"; }

  void SetUp() override {
    RunnerFixture::SetUp();
    const auto python = env_or("ATTNLAB_PYTHON", "");
    ATTNLAB_REQUIRE(!python.empty(), "ATTNLAB_PYTHON is not set (run through ctest)");
    torchrun_ = (std::filesystem::path(python).parent_path() / "torchrun").string();
    ATTNLAB_REQUIRE(std::filesystem::exists(torchrun_), "torchrun is not in the suite's venv: " + torchrun_);
    one_ = tmp_ + "/one.h5";
    two_ = tmp_ + "/two.h5";
  }

  /// `torchrun --standalone --nproc_per_node=N --no-python runner args...`
  ProcessResult torchrun_runner(int processes, const std::vector<std::string>& args) {
    std::vector<std::string> a = {"--standalone", "--nnodes=1", fmt::format("--nproc_per_node={}", processes),
                                  "--no-python", runner_};
    a.insert(a.end(), args.begin(), args.end());
    return run_process(torchrun_, a, source_, tmp_);
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
  ProcessResult pair_;

  static std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
};

/// Every epoch's value of each "group/name" series of `got` equals `want`'s within 1e-5
/// (relative), and both have `epochs` rows.
inline void expect_same_series(const results::ResultsReader& got, const results::ResultsReader& want,
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
inline void expect_same_losses(const results::ResultsReader& got, const results::ResultsReader& want, size_t epochs) {
  expect_same_series(got, want, {"train/loss", "val/loss"}, epochs);
}

/// `two` (a run of two ranks) completed, its ranks' weights agreeing, with the losses of `one` (the
/// same run as one process) for `epochs` epochs.
inline void expect_two_ranks_equal_one(const std::string& two, const std::string& one, size_t epochs) {
  results::ResultsReader b(two), a(one);
  EXPECT_EQ(b.attr_string("status"), "completed");
  EXPECT_EQ(b.attr_int("distributed_world_size"), 2);
  EXPECT_EQ(b.attr_int("distributed_weights_agree"), 1);
  expect_same_losses(b, a, epochs);
}

}  // namespace attnlab::testutil
