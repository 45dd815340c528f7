// `runner sweep` end to end with the real runner on tiny runs: a 2x3 grid with two jobs, --resume
// (a failed run and a missing file rerun, completed ones untouched, an interrupted run continued
// from its checkpoint), SIGINT to the sweep (no run left `running`), threads per run, sweep files,
// and the errors that stop it before anything runs.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace e2e_sweep_test {

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using testutil::contains;

const std::string kTiny = "experiments/tests/tiny_corners.yaml";

/// Occurrences of `part` in `text`.
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

/// Whether process `pid` is running (not gone, not a zombie waiting to be reaped).
bool running(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::string status_of(const std::string& results) { return results::ResultsReader(results).attr_string("status"); }

class Sweep : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-sweep"; }
  std::string manifest(const std::string& dir) { return testutil::read_file(dir + "/sweep.yaml"); }
};

TEST_F(Sweep, TwoByThreeGridWithTwoJobs) {
  const auto dir = tmp_ + "/grid";
  auto r = run({"sweep", kTiny, "model.norm=first,last", "seed=0,1,2", "trainer.max_epochs=2", "--jobs", "2", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "sweep: 6/6 done, 0 failed, 0 interrupted, 0 running, 0 pending")) << r.err;
  const auto m = manifest(dir);
  EXPECT_EQ(count(m, "status: completed"), 6u) << m;
  EXPECT_TRUE(contains(m, "model.norm: [first, last]")) << m;
  EXPECT_TRUE(contains(m, "overrides: [trainer.max_epochs=2]")) << m;
  for (const char* norm : {"first", "last"}) {
    for (int seed = 0; seed < 3; ++seed) {
      const auto name = fmt::format("{}/model.norm={}_seed={}", dir, norm, seed);
      ASSERT_TRUE(fs::exists(name + ".h5")) << name;
      results::ResultsReader in(name + ".h5");
      EXPECT_EQ(in.attr_string("status"), "completed");
      EXPECT_EQ(in.attr_int("seed"), seed);
      EXPECT_TRUE(contains(in.config(), fmt::format("norm: {}", norm))) << in.config();
      EXPECT_EQ(in.metric("train", "loss").size(), 2u);
      const auto log = testutil::read_file(name + ".log");
      EXPECT_TRUE(contains(log, "attempt 1:")) << log;
      EXPECT_TRUE(contains(log, "epoch 2/2")) << log;
    }
  }
  // The folder holds a sweep now: starting another there is refused.
  auto again = run({"sweep", kTiny, "seed=0,1", "-o", dir});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.err, "holds a sweep already")) << again.err;
}

TEST_F(Sweep, ResumeRerunsFailedAndMissingOnly) {
  const auto dir = tmp_ + "/resume";
  // A folder where seed=1's results file should be: that run fails when it creates its file.
  fs::create_directories(dir + "/seed=1.h5");
  auto r = run({"sweep", kTiny, "seed=0,1,2", "trainer.max_epochs=1", "-o", dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "1 of 3 runs did not complete (1 failed)")) << r.err;
  auto m = manifest(dir);
  EXPECT_EQ(count(m, "status: completed"), 2u) << m;
  EXPECT_EQ(count(m, "status: failed"), 1u) << m;
  EXPECT_TRUE(contains(testutil::read_file(dir + "/seed=1.log"), "error")) << testutil::read_file(dir + "/seed=1.log");

  fs::remove(dir + "/seed=1.h5");
  fs::remove(dir + "/seed=2.h5");  // a completed run whose file is gone: missing
  const auto kept = fs::last_write_time(dir + "/seed=0.h5");
  r = run({"sweep", dir, "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "2 of 3 runs to run (1 failed, 1 missing)")) << r.err;
  EXPECT_EQ(fs::last_write_time(dir + "/seed=0.h5"), kept);
  for (const char* seed : {"0", "1", "2"}) EXPECT_EQ(status_of(dir + "/seed=" + seed + ".h5"), "completed") << seed;
  m = manifest(dir);
  EXPECT_EQ(count(m, "status: completed"), 3u) << m;
  EXPECT_EQ(count(m, "attempts: 1"), 1u) << m;  // seed=0 ran once
  EXPECT_EQ(count(m, "attempts: 2"), 2u) << m;
  EXPECT_TRUE(contains(testutil::read_file(dir + "/seed=1.log"), "attempt 2:"));

  // Nothing left to do: resume runs nothing and succeeds.
  r = run({"sweep", dir, "--resume"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "0 of 3 runs to run")) << r.err;
  EXPECT_EQ(fs::last_write_time(dir + "/seed=0.h5"), kept);
}

// One sweep per folder at a time: a --resume beside a live sweep is refused (naming its pid) and
// leaves the manifest and the runs alone; it used to retry the live runs, be refused by their
// results files' locks and mark them failed while they completed.
TEST_F(Sweep, ResumeBesideALiveSweepIsRefused) {
  const auto dir = tmp_ + "/live";
  std::string second_err, manifest_during;
  int second_code = -1;
  auto r = run({"sweep", kTiny, "seed=0,1", "trainer.max_epochs=100000", "-o", dir},
               [&](pid_t pid, const std::string&) {
                 // The first run training (an epoch line in its log), then a resume beside it.
                 for (int i = 0; i < 600; ++i) {
                   if (fs::exists(dir + "/seed=0.log") &&
                       contains(testutil::read_file(dir + "/seed=0.log"), " 2/100000 ")) break;  // "epoch      2/100000"
                   std::this_thread::sleep_for(std::chrono::milliseconds(100));
                 }
                 manifest_during = manifest(dir);
                 // Bounded: a resume that is not refused would run the sweep's runs (100000 epochs).
                 auto second = run({"sweep", dir, "--resume"}, [](pid_t resumed, const std::string&) {
                   for (int i = 0; i < 150 && running(resumed); ++i) {
                     std::this_thread::sleep_for(std::chrono::milliseconds(100));
                   }
                   if (running(resumed)) kill(resumed, SIGINT);
                 });
                 second_code = second.exit_code;
                 second_err = second.err;
                 EXPECT_EQ(manifest(dir), manifest_during) << "the refused resume wrote the manifest";
                 kill(pid, SIGINT);
               });
  EXPECT_EQ(second_code, 1);
  EXPECT_TRUE(contains(second_err, "error: sweep folder " + fs::absolute(dir).lexically_normal().string()) ||
              contains(second_err, "error: sweep folder " + dir))
      << second_err;
  EXPECT_TRUE(contains(second_err, "is in use by another runner sweep (pid ")) << second_err;
  EXPECT_EQ(r.exit_code, 130) << r.err;
  const auto m = manifest(dir);
  EXPECT_EQ(count(m, "status: failed"), 0u) << m;
  EXPECT_EQ(status_of(dir + "/seed=0.h5"), "interrupted");
  EXPECT_FALSE(fs::exists(dir + "/sweep.yaml.lock")) << "the sweep's lock outlives it";
  // Now that it has ended, the folder resumes (dry run: what it would run).
  auto resumed = run({"sweep", dir, "--resume", "--dry-run"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
}

// A manifest listing no runs is damaged, not a finished sweep; a failed run is named with its error.
TEST_F(Sweep, EmptyManifestIsRefusedAndFailedRunsAreNamed) {
  const auto dir = tmp_ + "/named";
  auto r = run({"sweep", kTiny, "seed=0,1", "trainer.max_epochs=1", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto text = manifest(dir);
  const auto runs = text.find("runs:");
  ASSERT_NE(runs, std::string::npos);
  {
    std::ofstream out(dir + "/sweep.yaml");
    out << text.substr(0, runs) << "runs: []\n";
  }
  auto empty = run({"sweep", dir, "--resume"});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_TRUE(contains(empty.err, "'runs' is empty: a sweep manifest lists at least one run")) << empty.err;

  // A run that fails after the sweep's checks (a directory where its results file goes).
  const auto dir2 = tmp_ + "/fails";
  fs::create_directories(dir2 + "/seed=1.h5");
  auto f = run({"sweep", kTiny, "seed=0,1", "trainer.max_epochs=1", "-o", dir2});
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_TRUE(contains(f.err, "1 of 2 runs did not complete (1 failed)")) << f.err;
  EXPECT_TRUE(contains(f.err, "  seed=1 (exit 1): ")) << f.err;
  EXPECT_TRUE(contains(f.err, "seed=1.h5: it is a directory")) << f.err;

  // A file of the user's where a run's results go: a new sweep does not replace it, nor does its
  // --resume (the file is no results file: not the sweep's own earlier attempt).
  const auto dir3 = tmp_ + "/kept";
  fs::create_directories(dir3);
  std::ofstream(dir3 + "/seed=1.h5") << "a file of the user's";
  auto k = run({"sweep", kTiny, "seed=0,1", "trainer.max_epochs=1", "-o", dir3});
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_TRUE(contains(k.err, "  seed=1 (exit 1): ")) << k.err;
  EXPECT_TRUE(contains(k.err, "seed=1.h5 already exists")) << k.err;
  auto again = run({"sweep", dir3, "--resume"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.err, "seed=1.h5 already exists")) << again.err;
  EXPECT_EQ(testutil::read_file(dir3 + "/seed=1.h5"), "a file of the user's");
}

TEST_F(Sweep, SigintInterruptsRunningRunsAndLeavesNoneRunning) {
  const auto dir = tmp_ + "/sigint";
  bool signalled = false;
  auto r = run({"sweep", kTiny, "seed=0,1,2", "trainer.max_epochs=100000", "--jobs", "2", "-o", dir},
               [&](pid_t pid, const std::string&) {
                 // Both first runs training (an epoch line in each log), then ^C to the sweep.
                 for (int i = 0; i < 1200 && !signalled; ++i) {
                   std::this_thread::sleep_for(std::chrono::milliseconds(100));
                   const auto a = testutil::read_file(dir + "/seed=0.log"), b = testutil::read_file(dir + "/seed=1.log");
                   if (contains(a, "1/100000") && contains(b, "1/100000")) {
                     kill(pid, SIGINT);
                     signalled = true;
                   }
                 }
                 if (!signalled) kill(pid, SIGKILL);
               });
  ASSERT_TRUE(signalled) << r.err;
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_TRUE(contains(r.err, "stopped by signal 2")) << r.err;
  const auto m = manifest(dir);
  EXPECT_EQ(count(m, "status: running"), 0u) << m;
  EXPECT_EQ(count(m, "status: interrupted"), 2u) << m;
  EXPECT_EQ(count(m, "status: pending"), 1u) << m;
  EXPECT_EQ(status_of(dir + "/seed=0.h5"), "interrupted");
  EXPECT_EQ(status_of(dir + "/seed=1.h5"), "interrupted");
  EXPECT_FALSE(fs::exists(dir + "/seed=2.h5"));
  EXPECT_FALSE(fs::exists(dir + "/sweep.yaml.tmp"));
  auto dry = run({"sweep", dir, "--resume", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_TRUE(contains(dry.err, "3 of 3 runs to run (2 interrupted, 1 pending)")) << dry.err;
}

TEST_F(Sweep, ResumeContinuesAnInterruptedRunFromItsCheckpoint) {
  // The seq2seq trainer checkpoints every epoch (the corners' regression trainer does not). A
  // sweep without axes is one run, named run.h5.
  const auto dir = tmp_ + "/continue";
  const std::string results = dir + "/run.h5";
  bool signalled = false;
  auto r = run({"sweep", "experiments/tests/tiny_synthetic.yaml", "trainer.max_epochs=12", "-o", dir},
               [&](pid_t pid, const std::string&) {
    // Two epochs done and checkpointed, then ^C to the sweep.
    for (int i = 0; i < 2400 && !signalled; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      if (contains(testutil::read_file(dir + "/run.log"), " 2/12") && fs::exists(results + ".ckpt/last.pt")) {
        kill(pid, SIGINT);
        signalled = true;
      }
    }
    if (!signalled) kill(pid, SIGKILL);
  });
  ASSERT_TRUE(signalled) << r.err;
  ASSERT_EQ(r.exit_code, 130) << r.err;
  ASSERT_EQ(status_of(results), "interrupted");
  const auto before = results::ResultsReader(results).metric("train", "loss");
  ASSERT_GE(before.size(), 2u);
  ASSERT_LT(before.size(), 12u);

  r = run({"sweep", dir, "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "1 of 1 runs to run (1 interrupted)")) << r.err;
  const auto log = testutil::read_file(dir + "/run.log");
  const auto second = log.find("attempt 2:");
  ASSERT_NE(second, std::string::npos) << log;
  // The second attempt is the runner's --resume on the same file: it goes on from the epoch after
  // the checkpoint instead of starting again, and the epochs already trained stay as they were.
  const auto attempt2 = log.substr(second, log.find('\n', second) - second);
  EXPECT_TRUE(contains(attempt2, "--resume")) << attempt2;
  EXPECT_FALSE(contains(log.substr(second), " 1/12 ")) << log.substr(second);
  EXPECT_TRUE(contains(log.substr(second), "12/12")) << log.substr(second);
  EXPECT_EQ(status_of(results), "completed");
  const auto after = results::ResultsReader(results).metric("train", "loss");
  ASSERT_EQ(after.size(), 12u);
  for (size_t e = 0; e < before.size(); ++e) EXPECT_EQ(after[e], before[e]) << "epoch " << e + 1;
  const auto m = manifest(dir);
  EXPECT_TRUE(contains(m, "status: completed")) << m;
  EXPECT_TRUE(contains(m, "attempts: 2")) << m;
}

TEST_F(Sweep, ThreadsPerRunUnlessSetAndSweepFiles) {
  // tiny_corners sets threads: 1 (corners_base.yaml), so no run gets threads=.
  auto r = run({"sweep", kTiny, "seed=0,1", "--jobs", "2", "--dry-run", "-o", tmp_ + "/d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "2 runs into")) << r.out;
  EXPECT_FALSE(contains(r.out, "threads=")) << r.out;
  // An experiment without threads: each run gets max(1, cores / jobs).
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  r = run({"sweep", "experiments/nadaraya_watson.yaml", "seed=0,1", "--jobs", "2", "--dry-run", "-o", tmp_ + "/d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.out, fmt::format(" threads={} --results", std::max(1, cores / 2))), 2u) << r.out;
  // ... unless an axis sets them.
  r = run({"sweep", "experiments/nadaraya_watson.yaml", "threads=1,2", "--dry-run", "-o", tmp_ + "/d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.out, " threads=1 --results"), 1u) << r.out;
  EXPECT_EQ(count(r.out, " threads=2 --results"), 1u) << r.out;
  EXPECT_TRUE(contains(r.out, "threads as set")) << r.out;
  EXPECT_FALSE(fs::exists(tmp_ + "/d"));  // a dry run creates nothing

  const auto file = tmp_ + "/norm.yaml";
  std::ofstream(file) << "sweep:\n  experiment: " << source_ << "/" << kTiny
                      << "\n  axes: {model.norm: [first, last]}\n  overrides: {trainer.max_epochs: 1}\n"
                      << "  output: " << tmp_ << "/from-file\n";
  r = run({"sweep", file, "seed=3,4", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "4 runs into " + tmp_ + "/from-file")) << r.out;
  EXPECT_TRUE(contains(r.out, "model.norm=last_seed=4: ")) << r.out;
  EXPECT_EQ(count(r.out, "trainer.max_epochs=1"), 4u) << r.out;
}

TEST_F(Sweep, CompareGroupsTheSweepFolder) {
  const auto dir = tmp_ + "/groups";
  auto r = run({"sweep", kTiny, "model.norm=first,last", "seed=0,1,2", "trainer.max_epochs=2", "--jobs", "2", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {  // A failed run is left out of the groups.
    results::Results edit(dir + "/model.norm=last_seed=2.h5", results::Results::Open::Existing);
    edit.set_status(results::Status::Failed);
  }
  r = run({"compare", dir, "--group-by", "model.norm", "--plot", tmp_ + "/groups.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "5 runs in 2 groups by model.norm")) << r.out;
  EXPECT_TRUE(contains(r.out, "model.norm=first (n=3)")) << r.out;
  EXPECT_TRUE(contains(r.out, "model.norm=last (n=2)")) << r.out;
  EXPECT_TRUE(contains(r.out, "p (Welch)")) << r.out;
  EXPECT_TRUE(contains(r.out, "Hedges' g")) << r.out;
  EXPECT_TRUE(contains(r.out, "attention encoder_self layer 1 head 1")) << r.out;
  EXPECT_TRUE(contains(r.err, "model.norm=last_seed=2.h5 left out of the groups: its status is 'failed'")) << r.err;
  EXPECT_TRUE(contains(r.err, "wrote " + tmp_ + "/groups.png")) << r.err;
  EXPECT_GT(fs::file_size(tmp_ + "/groups.png"), 1000u);
  // Three groups: no test, the same columns otherwise; markdown as compare writes it.
  r = run({"compare", dir, "--group-by", "seed", "--format", "markdown", "--no-attention"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "5 runs in 3 groups by seed")) << r.out;
  EXPECT_TRUE(contains(r.out, "| seed=0 (n=2) |")) << r.out;
  EXPECT_FALSE(contains(r.out, "Welch")) << r.out;
  EXPECT_FALSE(contains(r.out, "attention")) << r.out;
  r = run({"compare", dir, "--group-by", "model.nrom"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "'model.nrom' is in no run's config; did you mean 'model.norm'?")) << r.err;
}

TEST_F(Sweep, CompareShowsTheSamplesMeanBleuPlainAndGrouped) {
  // d2l's "mean BLEU" over the experiment's evaluate.samples (/samples/bleu), per run and per group.
  const auto dir = tmp_ + "/bleu";
  auto r = run({"sweep", "experiments/tests/tiny_fra_eng.yaml", "seed=0,1", "trainer.max_epochs=1", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> means;
  for (const char* seed : {"0", "1"}) {
    const auto samples = results::ResultsReader(dir + "/seed=" + seed + ".h5").samples();
    ASSERT_EQ(samples.size(), 4u);
    double sum = 0;
    for (const auto& s : samples) sum += s.bleu;
    means.push_back(sum / 4);
  }
  r = run({"compare", dir, "--no-attention"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, fmt::format("- ({:.3f}, 4 sentences)", means[0]))) << r.out;
  r = run({"compare", dir, "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "samples mean sentence bleu")) << r.out;
  EXPECT_TRUE(contains(r.out, fmt::format("{:.9g}", means[1]))) << r.out;
  // One group of both runs (same trainer), its mean and sample sd.
  r = run({"compare", dir, "--group-by", "trainer.max_epochs", "--format", "csv", "--no-attention"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double mean = (means[0] + means[1]) / 2;
  const double sd = std::abs(means[0] - means[1]) / std::sqrt(2.0);
  const auto at = r.out.find("samples,sentence BLEU,mean,2,");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::vector<std::string> fields;  // section, quantity, value, n, mean, sd, ...
  std::stringstream row(r.out.substr(at, r.out.find('\n', at) - at));
  for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
  ASSERT_GE(fields.size(), 6u);
  EXPECT_NEAR(std::stod(fields[4]), mean, 1e-12);
  EXPECT_NEAR(std::stod(fields[5]), sd, 1e-12);
}

TEST_F(Sweep, SlurmDryRunPrintsOneArrayScript) {
  const auto dir = tmp_ + "/slurm";
  auto r = run({"sweep", kTiny, "model.norm=first,last", "seed=0,1,2", "--jobs", "2", "--launcher", "slurm",
                "--sbatch-arg=--time=0:10:00", "--dry-run", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("#!/bin/bash\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "#SBATCH --array=0-5%2\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "#SBATCH --time=0:10:00\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "#SBATCH --output=" + dir + "/slurm-%A_%a.out\n")) << r.out;
  EXPECT_EQ(count(r.out, "    exec " + runner_), 6u) << r.out;
  EXPECT_TRUE(contains(r.out, "  5)  # model.norm=last_seed=2\n")) << r.out;
  EXPECT_TRUE(contains(r.out, " model.norm=last seed=2 --results " + dir + "/model.norm=last_seed=2.h5 >> " + dir +
                                  "/model.norm=last_seed=2.log 2>&1 ;;"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "threads=")) << r.out;  // Slurm gives the cores
  EXPECT_FALSE(fs::exists(dir));
  // The script is valid bash.
  std::ofstream(tmp_ + "/s.sh") << r.out;
  EXPECT_EQ(std::system(("bash -n " + tmp_ + "/s.sh").c_str()), 0);
}

// Runs that all fail at once with one error, past the sweep's own checks (a layer the model lacks
// in a head mask; a device the machine lacks): the sweep stops after the first wave (two runs at
// --jobs 2) and says the error once, with no progress line before it; the rest stay pending.
TEST_F(Sweep, RunsThatAllFailAtOnceEndWithTheirOneError) {
  const auto dir = tmp_ + "/all-fail";
  auto r = run({"sweep", kTiny, "seed=0,1,2,3", "interventions.head_mask={encoder_self: {9: [1]}}", "--jobs", "2",
                "-o", dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 2u) << r.err;  // "runner sweep: 4 runs in DIR (2 at a time)" and this
  EXPECT_FALSE(contains(r.err, "sweep: 0/4")) << r.err;
  EXPECT_EQ(count(r.err, "encoder_self has no layer 9"), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "runner sweep: the first 2 runs all failed at once with the same error, so the sweep "
                              "ran no more (2 of 4 not run; once it is fixed, runner sweep " +
                                  fs::absolute(dir).lexically_normal().string() + " --resume runs them all): config error: "))
      << r.err;
  const auto m = manifest(dir);
  EXPECT_EQ(count(m, "status: failed"), 2u) << m;
  EXPECT_EQ(count(m, "status: pending"), 2u) << m;
}

// Slurm's own errors are several lines ("sbatch: error: ..." twice); the sweep says it in one: the
// command, its exit status and the lines joined. A stand-in sbatch on PATH prints two and exits 1.
TEST_F(Sweep, SlurmSubmitFailureIsOneLine) {
  const auto bin = tmp_ + "/slurm-bin";
  fs::create_directories(bin);
  std::ofstream(bin + "/sbatch") << "#!/bin/sh\necho 'sbatch: error: invalid partition specified: gpu' >&2\n"
                                    "echo 'sbatch: error: Batch job submission failed: Invalid partition name "
                                    "specified' >&2\nexit 1\n";
  fs::permissions(bin + "/sbatch", fs::perms::owner_all);
  testutil::ScopedEnv path("PATH", bin + ":" + testutil::env_or("PATH", "/usr/bin:/bin"));
  const auto dir = tmp_ + "/slurm-fails";
  auto r = run({"sweep", kTiny, "seed=0,1", "--launcher", "slurm", "-o", dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "runner sweep: sbatch --parsable " + fs::absolute(dir).lexically_normal().string() +
                                  "/sweep.sbatch failed (exit 1): invalid partition specified: gpu; Batch job "
                                  "submission failed: Invalid partition name specified\n"))
      << r.err;
}

TEST_F(Sweep, MistakesStopItBeforeAnythingRuns) {
  const auto dir = tmp_ + "/never";
  auto expect_error = [&](const std::vector<std::string>& args, const std::string& message) {
    auto all = args;
    all.insert(all.begin(), "sweep");
    auto r = run(all);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
    EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  };
  // The typo is in one run only (the last); the others would be valid.
  expect_error({kTiny, "seed=0,1", "model.norm=first,lsat", "-o", dir}, "sweep run 'seed=0_model.norm=lsat'");
  expect_error({kTiny, "model.nrom=first,last", "-o", dir}, "did you mean 'norm'");
  expect_error({kTiny, "seed=1,,2", "-o", dir}, "has an empty value");
  expect_error({kTiny, "seed=range(2,2)", "-o", dir}, "is empty");
  expect_error({kTiny, "seed=1,2", "seed=3", "-o", dir}, "'seed' is given twice");
  expect_error({"experiments/nope.yaml", "seed=1,2", "-o", dir}, "'experiments/nope.yaml': no such file");
  // Paths are checked without std::filesystem's throwing calls: a symlink loop is named, as a
  // sweep file, an experiment, a folder to resume and a folder to compare.
  const auto loop = tmp_ + "/loop";
  fs::create_symlink(loop, loop);
  expect_error({loop, "seed=1,2", "-o", dir}, "'" + loop + "': it is a symlink loop");
  expect_error({loop, "--resume"}, loop + " is not a sweep folder: it is a symlink loop");
  expect_error({kTiny, "seed=1,2", "-o", loop + "/sub"}, "a directory on its way is a symlink loop");
  expect_error({tmp_, "--resume"}, "is not a sweep folder");
  expect_error({tmp_ + "/x", "--resume", "seed=1"}, "takes the sweep folder alone");
  // What a plugin refuses when it is built (issue 42): 4 heads do not divide the corners model's
  // width of 6. Each distinct model is built before the first run trains; before, run 1 trained
  // and run 2 failed.
  expect_error({kTiny, "model.num_heads=3,4", "-o", dir},
               "sweep run 'model.num_heads=4': <command line> (at 'model.num_heads'): model 'seq2seq_regression': "
               "4 heads do not divide num_hiddens 6");
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace

}  // namespace e2e_sweep_test
