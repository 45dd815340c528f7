// End to end, issue 12 ("lost or mislabelled results", "validate before doing anything",
// allocation failures): the results file of a run says truthfully how it ended, whatever signal,
// second run, refused resume or stale checkpoint folder comes its way.
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

using testutil::contains;
using testutil::ScopedEnv;

class RunLifecycle : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-lifecycle"; }

  std::vector<std::string> tiny(const std::string& results, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), "-q");
    return testutil::tiny_synthetic(results, std::move(extra));
  }

  /// Waits (up to 5 minutes) until `path` exists; false on timeout.
  static bool wait_for(const std::string& path) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (!fs::exists(path)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  /// A long run (many epochs) on `results`, signalled with `sig` once its first checkpoint exists;
  /// `during` runs first, while it is alive.
  testutil::ProcessResult long_run_then(const std::string& results, int sig,
                                        const std::function<void(pid_t)>& during = {}) {
    return run(tiny(results, {"trainer.max_epochs=200"}), [&](pid_t pid, const std::string&) {
      if (!wait_for(train::checkpoint_dir(results) + "/last.pt")) ADD_FAILURE() << "no checkpoint after 5 minutes";
      if (during) during(pid);
      ::kill(pid, sig);
    });
  }
};

TEST_F(RunLifecycle, ASecondRunOnALiveRunsFileIsRefusedAndTouchesNothing) {
  const auto path = tmp_ + "/live.h5";
  testutil::ProcessResult second;
  fs::create_directories(tmp_ + "/second");
  auto first = long_run_then(path, SIGTERM, [&](pid_t pid) {
    second = testutil::run_process(runner_, tiny(path), source_, tmp_ + "/second");
    EXPECT_EQ(second.err, "results error: another run is writing " + path + " (pid " + std::to_string(pid) +
                              "); wait for it to end or choose another --results path\n");
  });
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_EQ(first.exit_code, 130) << first.err;
  results::ResultsReader r(path);
  EXPECT_EQ(r.attr_string("status"), "interrupted");
  EXPECT_TRUE(contains(r.config(), "experiment: tiny_synthetic")) << r.config();
  EXPECT_GE(r.metric("train", "loss").size(), 1u);
  EXPECT_FALSE(fs::exists(path + ".lock")) << "the lock file is removed when the run ends";
}

TEST_F(RunLifecycle, SighupEndsTheRunInterruptedLikeSigterm) {
  const auto path = tmp_ + "/hup.h5";
  auto r = long_run_then(path, SIGHUP);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(results::ResultsReader(path).attr_string("status"), "interrupted");
}

TEST_F(RunLifecycle, ASignalJustAfterTheFileIsCreatedEndsTheRunInterrupted) {
  ScopedEnv at("ATTNLAB_TEST_SIGNAL_AT", "results_created");
  const auto path = tmp_ + "/early.h5";
  auto r = run(tiny(path));
  EXPECT_EQ(r.exit_code, 130) << r.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string("status"), "interrupted");
  EXPECT_EQ(res.attr_string("interrupted_during"), "interrupted during training");
}

TEST_F(RunLifecycle, ASignalDuringTheSplitEvaluationEndsTheRunInterruptedNotCompleted) {
  ScopedEnv at("ATTNLAB_TEST_SIGNAL_AT", "evaluate_split");
  const auto path = tmp_ + "/eval.h5";
  auto r = run(tiny(path, {"trainer.max_epochs=1", "evaluate.split=test"}));
  EXPECT_EQ(r.exit_code, 130) << r.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string("status"), "interrupted");
  EXPECT_EQ(res.attr_string("interrupted_during"),
            "interrupted while translating the 'test' split (0 of 48 sentences done)");
  EXPECT_FALSE(res.has("eval/test"));
}

TEST_F(RunLifecycle, ARefusedResumeLeavesTheResultsFileByteForByte) {
  const auto path = tmp_ + "/base.h5";
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=1"})).exit_code, 0);
  const auto before = testutil::read_file(path);
  ASSERT_FALSE(before.empty());
  auto r = run({"experiments/tests/tiny_synthetic.yaml", "--resume", path, "-q", "model.encoder.ffn_num_hiddens=48",
                "model.decoder.ffn_num_hiddens=48"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot resume " + path + " with this experiment: checkpoint " +
                                  train::checkpoint_dir(path) + "/last.pt does not fit this model"))
      << r.err;
  EXPECT_EQ(testutil::read_file(path), before) << "a refused resume must not write to the file";
}

TEST_F(RunLifecycle, ANewRunOnAnOldPathClearsTheOldRunsCheckpoints) {
  const auto path = tmp_ + "/again.h5";
  const auto ckpt = train::checkpoint_dir(path);
  fs::create_directories(ckpt);
  std::ofstream(ckpt + "/best.pt") << "the previous run's weights";
  std::ofstream(ckpt + "/stale.txt") << "left by the previous run";
  auto r = run(tiny(path, {"trainer.max_epochs=1", "evaluate.split=test", "--overwrite"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(ckpt + "/stale.txt"));
  EXPECT_EQ(train::read_training_state(ckpt + "/best.pt").epoch, 1) << "best.pt is this run's";
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string_at("eval/test", "checkpoint"), "best");
}

TEST_F(RunLifecycle, ANewRunOnAnExistingResultsFileIsRefusedUnlessOverwriteIsSaid) {
  const auto path = tmp_ + "/kept.h5";
  ASSERT_EQ(run(tiny(path, {"trainer.max_epochs=1"})).exit_code, 0);
  const auto before = testutil::read_file(path);
  ASSERT_FALSE(before.empty());
  auto r = run(tiny(path, {"trainer.max_epochs=1", "seed=7"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "results error: results file " + path + " already exists (")) << r.err;
  EXPECT_TRUE(contains(r.err, "continue that run with `runner --resume " + path + " EXPERIMENT`, replace it with "
                              "--overwrite, or name another file with --results"))
      << r.err;
  EXPECT_EQ(testutil::read_file(path), before) << "a refused run must not touch the file";
  // --resume and --overwrite contradict each other.
  auto both = run({"experiments/tests/tiny_synthetic.yaml", "-q", "--resume", path, "--overwrite"});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_TRUE(contains(both.err, "--resume excludes --overwrite")) << both.err;
  EXPECT_EQ(testutil::read_file(path), before);
  // Asked for: the new run replaces the old one.
  r = run(tiny(path, {"trainer.max_epochs=1", "seed=7", "--overwrite"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_int("seed"), 7);
  EXPECT_EQ(res.attr_string("status"), "completed");
}

TEST_F(RunLifecycle, ACheckpointFolderWithoutItsResultsFileIsRefusedUnlessOverwriteIsSaid) {
  const auto path = tmp_ + "/orphan.h5";
  const auto ckpt = train::checkpoint_dir(path);
  fs::create_directories(ckpt);
  std::ofstream(ckpt + "/last.pt") << "an earlier run's weights";
  auto r = run(tiny(path, {"trainer.max_epochs=1"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "results error: checkpoint folder " + ckpt + " already exists")) << r.err;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(testutil::read_file(ckpt + "/last.pt"), "an earlier run's weights");
}

TEST_F(RunLifecycle, EncoderAndDecoderThatDoNotFitAreOneConfigErrorBeforeAnyFile) {
  const auto path = tmp_ + "/never.h5";
  auto r = run(tiny(path, {"model.decoder.num_hiddens=16", "model.decoder.num_heads=2"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "config error: "));
  EXPECT_TRUE(contains(r.err, "encoder 'transformer' (num_hiddens=32, ffn_num_hiddens=64, num_heads=2"));
  EXPECT_TRUE(contains(r.err, "and decoder 'transformer' (num_hiddens=16, ffn_num_hiddens=64, num_heads=2"));
  EXPECT_TRUE(contains(r.err, "do not fit together: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(at 'model')")) << r.err;
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(RunLifecycle, ATrainerTypoIsReportedBeforeTheDatasetIsFetched) {
  ScopedEnv no_mirror("ATTNLAB_DATA_MIRROR", std::nullopt);
  // Port 9 (discard) on loopback: a fetch would fail with a connection error naming this URL.
  auto r = run({"experiments/tests/tiny_fra_eng.yaml", "-q", "data_dir=" + tmp_ + "/empty",
                "dataset.url=http://127.0.0.1:9/fra-eng.zip", "trainer.plugin=seq2sq"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "no trainer plugin named 'seq2sq'; did you mean 'seq2seq'?")) << r.err;
  EXPECT_FALSE(contains(r.err, "127.0.0.1")) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/empty/fra-eng")) << "nothing may be fetched for an invalid experiment";
}

TEST_F(RunLifecycle, AnOversizedModelOptionIsRefusedByItsBound) {
  auto r = run(tiny(tmp_ + "/never.h5", {"model.encoder.num_hiddens=1000000"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "(at 'model.encoder.num_hiddens')")) << r.err;
  EXPECT_TRUE(contains(r.err, "65536")) << r.err;
}

TEST_F(RunLifecycle, AnAllocationFailureWhileBuildingIsOneErrorNotAnAbort) {
  // Under a 6 GB address-space limit a 65536-wide attention projection (16 GiB) cannot be
  // allocated on any machine. LibTorch throws; before the fix, libsentencepiece (loaded with the
  // plugins) had overwritten c10's FLAGS_caffe2_use_fatal_for_enforce, and the failure aborted.
  const auto path = tmp_ + "/never.h5";
  std::vector<std::string> args{"-c", "ulimit -v 6000000 && exec \"$0\" \"$@\"", runner_};
  for (const auto& a : tiny(path, {"model.encoder.num_hiddens=65536", "model.decoder.num_hiddens=65536"})) {
    args.push_back(a);
  }
  auto r = testutil::run_process("/bin/bash", args, source_, tmp_);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "plugin encoder 'transformer'")) << r.err;
  // In our words: the size in GiB, not LibTorch's "[enforce fail at alloc_cpu.cpp:127] err == 0. ...
  // you tried to allocate 17179869184 bytes. Error code 12".
  EXPECT_TRUE(contains(r.err, "failed: out of memory: can't allocate memory for one tensor of 16.0 GiB (")) << r.err;
  EXPECT_FALSE(contains(r.err, "enforce fail")) << r.err;
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(RunLifecycle, ANonFiniteLossReportedByAnyTrainerEndsTheRunDiverged) {
  // A trainer plugin that knows nothing of divergence reports a finite train loss and a NaN
  // validation loss: the runner itself calls the run diverged after that epoch and stops it.
  const std::string plugins = testutil::env_or("ATTNLAB_TEST_PLUGIN_DIR", "");
  ASSERT_FALSE(plugins.empty()) << "ATTNLAB_TEST_PLUGIN_DIR is not set (run through ctest)";
  const std::string dir = plugins + "/attnlab_trainer_test_reporting";
  const auto with = [&](const std::string& results, const std::string& val_loss) {
    return run({"--plugin-path", dir, "experiments/tests/tiny_synthetic.yaml", "--results", results, "-q",
                "trainer={plugin: test_reporting, max_epochs: 5, val_loss: " + val_loss + "}"});
  };
  const auto nan_path = tmp_ + "/nan.h5";
  auto r = with(nan_path, ".nan");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  {
    results::ResultsReader res(nan_path);
    EXPECT_EQ(res.status(), results::Status::Diverged);
    EXPECT_EQ(res.attr_string("diverged"), "val loss is nan at epoch 1");
    EXPECT_EQ(res.metric("train", "loss").size(), 1u);  // stopped after the first report
  }
  // The same trainer with a finite loss completes all its epochs (the plugin itself works).
  const auto ok_path = tmp_ + "/ok.h5";
  auto ok = with(ok_path, "0.25");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  results::ResultsReader res(ok_path);
  EXPECT_EQ(res.status(), results::Status::Completed);
  EXPECT_FALSE(res.has_attr("diverged"));
  EXPECT_EQ(res.metric("val", "loss"), std::vector<double>(5, 0.25));
}

/// `sh -c command` from `cwd`: its stdout, trailing newline removed ("" and a test failure when it fails).
std::string sh(const std::string& cwd, const std::string& command) {
  std::string out;
  FILE* p = popen(("cd '" + cwd + "' && " + command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << command << ": " << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST_F(RunLifecycle, RecordsTheCommitItsRunnerWasBuiltFromAndTheOneItsExperimentFileLiesIn) {
  // The experiment file in a git repository of its own, run from there: git_commit must still name
  // the runner's build (the commit `runner --version` names, one of the source tree's), not the
  // HEAD of the folder the run starts in, which is experiment_git_commit.
  const auto repo = tmp_ + "/lab";
  fs::create_directories(repo);
  fs::copy_file(source_ + "/experiments/tests/tiny_synthetic.yaml", repo + "/tiny.yaml");
  sh(repo, "git init -q . && git add tiny.yaml && git -c user.name=t -c user.email=t@t commit -qm tiny");
  const std::string lab_head = sh(repo, "git rev-parse --short HEAD");

  const auto version = testutil::run_process(runner_, {"--version"}, repo, tmp_);
  ASSERT_EQ(version.exit_code, 0) << version.err;
  const std::string marker = "built from commit ";
  const auto at = version.out.find(marker);
  ASSERT_NE(at, std::string::npos) << version.out;
  const std::string built = version.out.substr(at + marker.size(), version.out.find(',', at) - at - marker.size());
  const std::string built_hash = built.substr(0, built.find('-'));
  ASSERT_GE(built_hash.size(), 7u) << version.out;
  sh(source_, "git cat-file -e " + built_hash + "^{commit}");  // a commit of the runner's own source
  EXPECT_NE(built_hash, lab_head);

  const auto clean = tmp_ + "/clean.h5";
  auto r = testutil::run_process(runner_, {"tiny.yaml", "--results", clean, "-q", "trainer.max_epochs=1"}, repo, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results::ResultsReader rc(clean);
  EXPECT_EQ(rc.attr_string("git_commit"), built);
  EXPECT_EQ(rc.attr_string("experiment_git_commit"), lab_head);

  // The file changed since its commit: "-dirty"; a resume adds its own pair and keeps the first.
  { std::ofstream(repo + "/tiny.yaml", std::ios::app) << "# changed\n"; }
  const auto dirty = tmp_ + "/dirty.h5";
  r = testutil::run_process(runner_, {"tiny.yaml", "--results", dirty, "-q", "trainer.max_epochs=1"}, repo, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(results::ResultsReader(dirty).attr_string("experiment_git_commit"), lab_head + "-dirty");
  r = testutil::run_process(runner_, {"tiny.yaml", "--resume", dirty, "-q", "trainer.max_epochs=2"}, repo, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results::ResultsReader rr(dirty);
  EXPECT_EQ(rr.attr_string("git_commit"), built);
  EXPECT_EQ(rr.attr_string("resume_git_commit"), built);
  EXPECT_EQ(rr.attr_string("experiment_git_commit"), lab_head + "-dirty");
  EXPECT_EQ(rr.attr_string("resume_experiment_git_commit"), lab_head + "-dirty");

  // Outside any checkout: no experiment_git_commit, and git_commit as before.
  const auto loose = tmp_ + "/loose";
  fs::create_directories(loose);
  fs::copy_file(repo + "/tiny.yaml", loose + "/tiny.yaml");
  const auto outside = tmp_ + "/outside.h5";
  r = testutil::run_process(runner_, {"tiny.yaml", "--results", outside, "-q", "trainer.max_epochs=1"}, loose, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results::ResultsReader ro(outside);
  EXPECT_EQ(ro.attr_string("git_commit"), built);
  EXPECT_FALSE(ro.has_attr("experiment_git_commit"));
}

}  // namespace
