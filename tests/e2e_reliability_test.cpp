// End to end, issue 12: whatever the input, the runner ends with one clear error line (or a
// warning) and a known exit code; it neither hangs nor writes outside results/.
#include <sys/stat.h>

#include <attnlab/data/fetch.hpp>
#include <fmt/format.h>

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

}  // namespace
