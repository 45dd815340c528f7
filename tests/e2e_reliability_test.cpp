// End to end, issue 12: whatever the input, the runner ends with one clear error line (or a
// warning) and a known exit code; it neither hangs nor writes outside results/.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <attnlab/data/fetch.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include "testing/corpus.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

using testutil::contains;

class Reliability : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-reliability"; }
  /// An experiment file in the scratch folder over the tiny corner-sequence run (seconds on a CPU).
  std::string experiment(const std::string& name, const std::string& body) {
    const auto path = tmp_ + "/" + name;
    std::ofstream(path) << "defaults: [" << source_ << "/experiments/tests/tiny_corners.yaml]\n" << body;
    return path;
  }
  using Cases = std::vector<std::pair<std::vector<std::string>, std::string>>;
  /// Runs each command line: exit 1 and one line on stderr ending with its expected text.
  void expect_one_line_errors(const Cases& cases) {
    for (const auto& [args, want] : cases) {
      const std::string cmd = fmt::format("runner {}", fmt::join(args, " "));
      auto r = run(args);
      EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.err;
      EXPECT_EQ(testutil::count_lines(r.err), 1u) << cmd << "\n" << r.err;
      EXPECT_TRUE(contains(r.err, want + "\n")) << cmd << "\n" << r.err;
    }
  }
};

TEST_F(Reliability, NanLearningRateIsAConfigErrorAtItsPlace) {
  const auto exp = experiment("nan.yaml", "trainer:\n  lr: .nan\n");
  auto r = run({exp, "--results", tmp_ + "/never.h5", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "config error: " + exp +
                       ":3:7 (at 'trainer.lr'): trainer 'regression': expected a finite number, found '.nan'\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(Reliability, AFifoAsTheExperimentIsRefusedNotWaitedOn) {
  const auto fifo = tmp_ + "/exp.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run({fifo, "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "config error: <command line>: cannot read config file '" + fifo +
                       "': it is a FIFO (named pipe), not a regular file\n");
}

TEST_F(Reliability, InvalidUtf8InACorpusNamesTheFileTheMemberAndTheLine) {
  // A fra-eng zip accepted by its pinned checksum whose line 3 holds a Latin-1 byte: the DataError
  // said "invalid UTF-8: byte 0xe9 at offset ..." and nothing about where.
  std::string text = testutil::fra_text(700, false);
  const size_t line3 = text.find('\n', text.find('\n') + 1) + 1;
  text.insert(line3 + 2, "\xe9");
  const auto zip = tmp_ + "/data/fra-eng/fra-eng.zip";
  testutil::write_zip(zip, {{"fra-eng/fra.txt", text}});
  auto r = run({"experiments/tests/tiny_fra_eng.yaml", "data_dir=" + tmp_ + "/data",
                "dataset.sha256=" + data::sha256_file(zip), "--results", tmp_ + "/never.h5", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, fmt::format("{}:fra-eng/fra.txt:3: invalid UTF-8 at byte {} (byte 3 of the line): "
                                          "byte 0xe9 starts a 3-byte character, but its byte 2 is 0x6e (not "
                                          "0x80-0xbf)\n",
                                          zip, line3 + 2)))
      << r.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(Reliability, SymlinkLoopsAreOneLineErrorsNamingThePath) {
  // Each path a user gives, as `ln -s loop loop`: it was "filesystem error: status: Too many
  // levels of symbolic links [loop]", an HDF5 error stack, or silence (--plugin-path).
  const auto loop = tmp_ + "/loop", loop_png = tmp_ + "/loop.png";
  ASSERT_EQ(::symlink("loop", loop.c_str()), 0);
  ASSERT_EQ(::symlink("loop.png", loop_png.c_str()), 0);
  const auto includes = experiment("includes_loop.yaml", "");
  std::ofstream(includes) << "defaults: [loop]\n";
  const auto run_h5 = tmp_ + "/run.h5";
  {
    results::Results w(run_h5, "made_here");
    w.append_metric("train", "loss", 1.0);
    w.set_status(results::Status::Completed);
  }
  const std::string corners = "experiments/tests/tiny_corners.yaml", fra = "experiments/tests/tiny_fra_eng.yaml";
  const std::string loop_file = "'" + loop + "'";
  const Cases cases = {
      {{loop, "-q"}, "config error: <command line>: cannot read config file " + loop_file + ": it is a symlink loop"},
      {{includes, "-q"}, "cannot read config file " + loop_file + ": it is a symlink loop"},
      {{"summary", loop},
       "config error: <command line>: cannot read config file " + loop_file + ": it is a symlink loop"},
      {{corners, "--results", loop, "-q"},
       "results error: cannot write results file " + loop + ": it is a symlink loop"},
      {{corners, "--results", loop + "/r.h5", "-q"},
       "results error: cannot write results file " + loop + "/r.h5: a directory on its way is a symlink loop"},
      {{corners, "results.path=" + loop, "-q"},
       "results error: cannot write results file " + loop + ": it is a symlink loop"},
      {{corners, "--resume", loop, "-q"}, "results error: cannot resume " + loop + ": it is a symlink loop"},
      {{corners, "--plugin-path", loop, "-q"},
       "plugin error: plugin folder " + loop + " (--plugin-path): it is a symlink loop"},
      {{"plugins", "--plugin-path", loop},
       "plugin error: plugin folder " + loop + " (--plugin-path): it is a symlink loop"},
      {{fra, "data_dir=" + loop, "-q"},
       "data error: cannot use the data dir " + loop + " for fra-eng/fra-eng.zip: it is a symlink loop"},
      {{"compare", run_h5, loop}, "results error: not an attnlab results file: " + loop + " (it is a symlink loop)"},
      {{"compare", run_h5, run_h5, "--plot", loop_png}, "error: plot file " + loop_png + ": it is a symlink loop"},
      {{"plot", loop}, "results error: not an attnlab results file: " + loop + " (it is a symlink loop)"},
      {{"plot", run_h5, "-o", loop}, "error: plot: -o " + loop + ": it is a symlink loop"},
      {{"plot", run_h5, "--losses", "-o", loop_png}, "error: plot file " + loop_png + ": it is a symlink loop"},
      {{"plot", run_h5, "--losses", "-o", loop + "/l.png"},
       "error: plot file " + loop + "/l.png: cannot make its folder " + loop + ": it is a symlink loop"},
      {{"eval", loop}, "results error: not an attnlab results file: " + loop + " (it is a symlink loop)"},
      {{"batches", corners, "--epochs", "1", "-o", loop},
       "results error: cannot write results file " + loop + ": it is a symlink loop"},
  };
  expect_one_line_errors(cases);
  // The data mirror, from the environment the runner inherits.
  testutil::ScopedEnv mirror("ATTNLAB_DATA_MIRROR", loop);
  auto r = run({fra, "data_dir=" + tmp_ + "/empty", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "data error: cannot use the data mirror " + loop +
                       " (ATTNLAB_DATA_MIRROR) for fra-eng/fra-eng.zip: it is a symlink loop\n");
}

TEST_F(Reliability, DevicesAndProcFilesAreRefusedByNameNotRead) {
  // /dev/zero given where a file is read whole ended in std::bad_alloc naming nothing; /proc files
  // report size 0 but have content.
  const auto includes = experiment("includes_zero.yaml", "");
  std::ofstream(includes) << "defaults: [/dev/zero]\n";
  fs::create_directories(tmp_ + "/mirror/fra-eng");
  ASSERT_EQ(::symlink("/dev/zero", (tmp_ + "/mirror/fra-eng/fra-eng.zip").c_str()), 0);
  const std::string device = "it is a device, not a regular file";
  const Cases cases = {
      {{"/dev/zero", "-q"}, "config error: <command line>: cannot read config file '/dev/zero': " + device},
      {{includes, "-q"}, "cannot read config file '/dev/zero': " + device},
      {{"/proc/kallsyms", "-q"},
       "config error: <command line>: cannot read config file '/proc/kallsyms': it has more than the 4194304 bytes a "
       "config file may have"},
      {{"experiments/tests/tiny_corners.yaml", "--resume", "/dev/zero", "-q"},
       "results error: cannot resume /dev/zero: " + device},
      {{"experiments/tests/tiny_corners.yaml", "--plugin-path", "/dev/zero", "-q"},
       "plugin error: plugin folder /dev/zero (--plugin-path): it is a device, not a directory"},
      {{"compare", "/dev/zero", "/dev/zero"}, "results error: not an attnlab results file: /dev/zero (" + device + ")"},
  };
  expect_one_line_errors(cases);
  testutil::ScopedEnv mirror("ATTNLAB_DATA_MIRROR", tmp_ + "/mirror");
  auto r = run({"experiments/tests/tiny_fra_eng.yaml", "data_dir=" + tmp_ + "/data", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "data error: cannot copy fra-eng/fra-eng.zip from the data mirror: " + tmp_ +
                       "/mirror/fra-eng/fra-eng.zip: " + device + "\n");
}

TEST_F(Reliability, MoreThreadsThanCoresAreCappedWithAWarning) {
  const auto path = tmp_ + "/threads.h5";
  auto r = run({"experiments/tests/tiny_corners.yaml", "threads=100000", "trainer.max_epochs=1", "--results", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  EXPECT_TRUE(contains(r.out + r.err, fmt::format("<command line> (at 'threads'): threads: 100000 is more than this "
                                                  "machine's {} cores; using {}",
                                                  cores, cores)))
      << r.out << r.err;
}

TEST_F(Reliability, ThreadsAutoPicksByModelSizeAndRecordsTheChoice) {
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  const auto small = tmp_ + "/small.h5", large = tmp_ + "/large.h5", fixed = tmp_ + "/fixed.h5";
  auto r = run({"experiments/tests/tiny_corners.yaml", "threads=auto", "trainer.max_epochs=1", "--results", small});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "threads auto: ")) << r.out << r.err;
  // 1+1 blocks of width 256 on the data-free copy task: about 1.6M parameters.
  r = run({"experiments/tests/tiny_synthetic.yaml", "threads=auto", "trainer.max_epochs=1",
           "model.encoder.num_hiddens=256", "model.encoder.ffn_num_hiddens=512", "model.decoder.num_hiddens=256",
           "model.decoder.ffn_num_hiddens=512", "dataset.num_train=64", "evaluate={}", "--results", large});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run({"experiments/tests/tiny_corners.yaml", "threads=1", "trainer.max_epochs=1", "--results", fixed});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results::ResultsReader s(small), l(large), f(fixed);
  EXPECT_EQ(s.attr_int("threads"), 1);
  EXPECT_TRUE(contains(s.attr_string("threads_choice"), "parameters, below 250000: 1 thread"))
      << s.attr_string("threads_choice");
  ASSERT_GE(l.attr_int("num_parameters"), 250000);
  EXPECT_EQ(l.attr_int("threads"), static_cast<int64_t>(cores));
  EXPECT_TRUE(contains(l.attr_string("threads_choice"), "at least 250000")) << l.attr_string("threads_choice");
  EXPECT_EQ(f.attr_int("threads"), 1);
  EXPECT_FALSE(f.has_attr("threads_choice"));
  for (const std::string bad : {"threads=many", "threads=-2", "threads=1.5"}) {
    r = run({"experiments/tests/tiny_corners.yaml", bad, "--results", tmp_ + "/never.h5"});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_TRUE(
        contains(r.err, "(at 'threads'): the experiment: expected a number of threads (0 = one per core) or auto"))
        << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(Reliability, ParseErrorsAreOneLineAndExitOne) {
  const std::vector<std::vector<std::string>> bad = {
      {"--no-such-option"},
      {},
      {"experiments/tests/tiny_corners.yaml", "--resume", "-q"},
      {"plugins", "--no-such-option"},
      {"compare"},
      {"plot", "a.h5", "--no-such-option"},
      {"eval", "a.h5", "--beam", "zero"},
      {"summary"},
      {"batches", "experiments/tests/tiny_corners.yaml", "--epochs", "x"},
      // Numbers outside what the option means (a negative seed used to become 2^64-1).
      {"prune", "a.h5", "--seed", "-1"},
      {"eval", "a.h5", "--max-steps", "-1"},
      {"eval", "a.h5", "--length-penalty", "nan"},
      {"eval", "a.h5", "--length-penalty", "-0.5"},
      {"batches", "experiments/tests/tiny_corners.yaml", "-o", "--overwrite"},
      {"experiments/tests/tiny_corners.yaml", "--results", "a.h5", "--resume", "a.h5", "--overwrite"},
  };
  for (const auto& args : bad) {
    const std::string cmd = fmt::format("runner {}", fmt::join(args, " "));
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.err;
    EXPECT_EQ(testutil::count_lines(r.err), 1u) << cmd << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "--help)")) << cmd << "\n" << r.err;
  }
  auto resume = run({"experiments/tests/tiny_corners.yaml", "--resume", "-q"});
  EXPECT_TRUE(contains(resume.err, "--resume: expected a file, found '-q', which looks like an option")) << resume.err;
  for (const char* sub : {"plugins", "compare", "plot", "eval", "summary", "batches"}) {
    auto help = run({sub, "--help"});
    EXPECT_EQ(help.exit_code, 0) << sub << help.err;
    EXPECT_TRUE(contains(help.out, "Usage")) << sub << help.out;
  }
  EXPECT_EQ(run({"--help"}).exit_code, 0);
}

TEST_F(Reliability, DefaultResultsFileNameStaysInResults) {
  // The runner writes results/ in its working folder: run it in the scratch folder.
  const auto exp = experiment("escape.yaml", "experiment: ../../x\ntrainer: {max_epochs: 1}\n");
  auto r = testutil::run_process(runner_, {exp, "-q"}, tmp_, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> written;
  for (const auto& e : fs::directory_iterator(tmp_ + "/results")) {
    if (e.path().extension() == ".h5") written.push_back(e.path().filename().string());
  }
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].rfind("_._.._x-", 0), 0u) << written[0];

  const auto empty = experiment("empty.yaml", "experiment: ''\ntrainer: {max_epochs: 1}\n");
  r = testutil::run_process(runner_, {empty, "-q"}, tmp_, tmp_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t unnamed = 0;
  for (const auto& e : fs::directory_iterator(tmp_ + "/results")) {
    unnamed += e.path().filename().string().rfind("experiment-", 0) == 0 && e.path().extension() == ".h5";
  }
  EXPECT_EQ(unnamed, 1u);
}

// The fuzzer's kept finds on the results reader crash, hang or exhaust HDF5 1.10.8 itself; every
// command that reads results files turns each into one error line (the read check in a child).
TEST_F(Reliability, DamagedResultsFilesAreOneLineErrorsForEveryReadingCommand) {
  testutil::ScopedEnv seconds("ATTNLAB_READ_CHECK_SECONDS", "2");
  Cases cases;
  for (const auto& entry : fs::directory_iterator(source_ + "/fuzz/known/results_reader")) {
    const auto path = entry.path().string();
    for (const char* command : {"compare", "plot", "eval"}) cases.push_back({{command, path}, path});
  }
  ASSERT_GE(cases.size(), 27u);
  for (const auto& [args, path] : cases) {
    const std::string cmd = fmt::format("runner {}", fmt::join(args, " "));
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.err;
    EXPECT_EQ(testutil::count_lines(r.err), 1u) << cmd << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, path)) << cmd << "\n" << r.err;
  }
}

}  // namespace
