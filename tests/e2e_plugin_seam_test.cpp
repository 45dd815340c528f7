// End to end at the plugin seam: errors raised inside plugins reach the user as one line and exit
// 1 (they used to segfault the runner), and broken libraries on the plugin path break only the
// experiments that ask for what they provide.
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class PluginSeamTest : public testutil::RunnerFixture {
 protected:
  void SetUp() override {
    RunnerFixture::SetUp();
    if (HasFatalFailure()) return;
    test_plugins_ = testutil::env_or("ATTNLAB_TEST_PLUGIN_DIR", "");
    ASSERT_FALSE(test_plugins_.empty()) << "ATTNLAB_TEST_PLUGIN_DIR is not set (run through ctest)";
  }
  std::string scratch_prefix() const override { return "attnlab-seam"; }

  std::string test_plugin(const std::string& name) const {
    return (fs::path(test_plugins_) / name / ("lib" + name + ".so")).string();
  }

  /// A plugin folder holding one library of each broken sort, under libattnlab_* names.
  std::string broken_folder() {
    auto dir = tmp_ + "/broken-plugins";
    fs::create_directories(dir);
    fs::copy_file(test_plugin("attnlab_scorer_test_abi"), dir + "/libattnlab_scorer_test_abi.so");
    fs::copy_file(test_plugin("attnlab_scorer_test_undefined"), dir + "/libattnlab_scorer_test_undefined.so");
    fs::copy_file(test_plugin("attnlab_scorer_test_good"), dir + "/libattnlab_scorer_truncated.so");
    fs::resize_file(dir + "/libattnlab_scorer_truncated.so", 4096);
    std::ofstream(dir + "/libattnlab_scorer_garbage.so") << "not a library";
    return dir;
  }

  /// Exactly one line on stderr, which starts with `prefix`; no crash, no backtrace.
  static void expect_one_error_line(const testutil::ProcessResult& r, const std::string& prefix) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    EXPECT_EQ(err.find('\n'), std::string::npos) << "more than one line:\n" << r.err;
    EXPECT_EQ(err.rfind(prefix, 0), 0u) << r.err;
    EXPECT_EQ(err.find("Exception raised from"), std::string::npos) << r.err;
  }

  static std::string last_line(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    const auto cut = s.rfind('\n');
    return cut == std::string::npos ? s : s.substr(cut + 1);
  }

  std::string test_plugins_;
};

TEST_F(PluginSeamTest, InTreePluginConfigErrorIsOneLineNotACrash) {
  // The transformer encoder needs a token vocabulary; corners has continuous features. Its
  // factory throws a ConfigError, which crashed the runner (rc 139) before.
  auto yaml = tmp_ + "/pairing.yaml";
  std::ofstream(yaml) << "experiment: wrong_pairing\n"
                      << "dataset: {plugin: corners, n: 32, test_n: 16}\n"
                      << "model:\n  encoder: {plugin: transformer}\n  decoder: {plugin: transformer}\n"
                      << "trainer: {plugin: regression}\n";
  auto results = tmp_ + "/never.h5";
  auto r = run({yaml, "--results", results});
  expect_one_error_line(r, "config error: ");
  EXPECT_NE(r.err.find("transformer"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(results));
}

TEST_F(PluginSeamTest, OutOfTreeFactoryConfigErrorIsOneLineNotACrash) {
  auto r = run({"--plugin-path", fs::path(test_plugin("attnlab_scorer_test_config_error")).parent_path().string(),
                "experiments/tests/tiny_corners.yaml", "model.attention.scorer={plugin: test_config_error, scale: 3}",
                "--results", tmp_ + "/never.h5"});
  expect_one_error_line(r, "config error: ");
  EXPECT_NE(r.err.find("refuses scale 3 (deliberate config error)"), std::string::npos) << r.err;
}

TEST_F(PluginSeamTest, BrokenLibrariesOnThePathDoNotBreakAnUnrelatedRun) {
  // --plugin-path before the experiment (it used to swallow the positionals).
  auto dir = broken_folder();
  auto results = tmp_ + "/nw.h5";
  auto r = run({"--plugin-path", dir, "experiments/nadaraya_watson.yaml", "--results", results});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* lib : {"libattnlab_scorer_test_abi.so", "libattnlab_scorer_test_undefined.so",
                          "libattnlab_scorer_truncated.so", "libattnlab_scorer_garbage.so"}) {
    EXPECT_NE(r.err.find(lib), std::string::npos) << lib << " not warned about:\n" << r.err;
  }
  EXPECT_EQ(results::ResultsReader(results).status(), results::Status::Completed);
  // Listing plugins works too, and says nothing broke the in-tree ones.
  auto list = run({"plugins", "--plugin-path", dir});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("dot_product"), std::string::npos) << list.out;
}

TEST_F(PluginSeamTest, AskingForABrokenLibrarysPluginNamesTheLibraryAndWhy) {
  auto dir = broken_folder();
  auto r = run({"experiments/tests/tiny_corners.yaml", "--plugin-path", dir, "model.attention.scorer=test_undefined",
                "--results", tmp_ + "/never.h5"});
  // The skipped libraries are warned about first; the error is the one line after them.
  expect_one_error_line({r.exit_code, r.out, last_line(r.err)}, "config error: ");
  EXPECT_NE(r.err.find("libattnlab_scorer_test_undefined.so"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("undefined symbol"), std::string::npos) << r.err;
  auto abi = run({"experiments/tests/tiny_corners.yaml", "--plugin-path", dir, "model.attention.scorer=test_scorer",
                  "--results", tmp_ + "/never.h5"});
  EXPECT_EQ(abi.exit_code, 1) << abi.err;
  EXPECT_NE(abi.err.find("built for ABI 999"), std::string::npos) << abi.err;
}

TEST_F(PluginSeamTest, ErrorAttributeHoldsTheMessageNotABacktrace) {
  // A trainer plugin fails inside torch at its second epoch; torch's message carries a C++
  // backtrace, which the error attribute (and the one line printed) must leave out.
  auto results = tmp_ + "/failed.h5";
  auto r = run({"--plugin-path", fs::path(test_plugin("attnlab_trainer_test_reporting")).parent_path().string(),
                "experiments/tests/tiny_synthetic.yaml", "trainer={plugin: test_reporting, fail_at_epoch: 2}",
                "--results", results});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("deliberate failure at epoch 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
  results::ResultsReader run(results);
  EXPECT_EQ(run.status(), results::Status::Failed);
  EXPECT_EQ(run.metric("train", "loss").size(), 1u);  // the first epoch's numbers are kept
  const auto error = run.attr_string("error");
  EXPECT_NE(error.find("deliberate failure at epoch 2"), std::string::npos) << error;
  EXPECT_EQ(error.find("Exception raised from"), std::string::npos) << error;
  EXPECT_EQ(error.find("frame #"), std::string::npos) << error;
}

TEST_F(PluginSeamTest, AScorersExceptionMidRunNamesThePlugin) {
  // The test scorer's score() throws at its 40th call, in the first epoch (after the dry forward
  // at build time): one line naming the plugin, its library and its place in the experiment file,
  // and the same in the results file's error attribute.
  const auto dir = fs::path(test_plugin("attnlab_scorer_test_good")).parent_path().string();
  auto results = tmp_ + "/failed.h5";
  auto r = run({"--plugin-path", dir, "experiments/tests/tiny_synthetic.yaml",
                "model.encoder.attention.scorer={plugin: test_scorer, throw_at_call: 40}", "--results", results});
  expect_one_error_line({r.exit_code, r.out, last_line(r.err)}, "plugin error: plugin scorer 'test_scorer' (");
  for (const char* part : {"libattnlab_scorer_test_good.so) at 'model.encoder.attention.scorer' failed in score(): ",
                           "deliberate failure in score() call 40"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << "\n" << r.err;
  }
  results::ResultsReader failed(results);
  EXPECT_EQ(failed.status(), results::Status::Failed);
  const auto error = failed.attr_string("error");
  EXPECT_EQ(error.rfind("plugin scorer 'test_scorer' (", 0), 0u) << error;
  EXPECT_NE(error.find("at 'model.encoder.attention.scorer' failed in score(): deliberate failure in score() call 40"),
            std::string::npos)
      << error;
}

TEST_F(PluginSeamTest, AGruDecoderNarrowerThanItsEncoderIsAConfigErrorBeforeAnyFile) {
  // It failed inside torch on the first batch; now the dry forward at build time refuses it.
  REQUIRE_FRA_ENG();
  auto results = tmp_ + "/never.h5";
  auto r = run({"experiments/bahdanau_fra_eng.yaml", "model.decoder.num_hiddens=16", "trainer.max_epochs=1",
                "data_dir=" + data_dir_, "--results", results});
  expect_one_error_line(r, "config error: ");
  EXPECT_NE(r.err.find("decoder 'gru_bahdanau' (embed_size=32, num_hiddens=16"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(results));
}

// Trainer, model and dataset that do not fit together: one config error naming the plugins,
// before any file is written (each of these crashed the runner or failed mid-run before).
struct Pairing {
  std::string what;
  std::string yaml;                // written after `experiment: pairing`
  std::vector<std::string> names;  // every one must appear in the error
};

void PrintTo(const Pairing& p, std::ostream* os) { *os << p.what; }

class PairingTest : public PluginSeamTest, public ::testing::WithParamInterface<Pairing> {};

TEST_P(PairingTest, IsOneConfigErrorNamingThePlugins) {
  const Pairing& p = GetParam();
  auto yaml = tmp_ + "/pairing.yaml";
  std::ofstream(yaml) << "experiment: pairing\nthreads: 1\n" << p.yaml;
  auto results = tmp_ + "/never.h5";
  auto r = run({yaml, "--results", results});
  expect_one_error_line(r, "config error: ");
  for (const auto& name : p.names) EXPECT_NE(r.err.find(name), std::string::npos) << name << ": " << r.err;
  EXPECT_FALSE(fs::exists(results));
}

const std::string kTokens = "dataset: {plugin: synthetic_tokens, vocab_size: 16, num_steps: 8, num_train: 64}\n";
const std::string kCorners = "dataset: {plugin: corners, n: 32, test_n: 16}\n";
const std::string kTransformers =
    "model:\n  encoder: {plugin: transformer, num_hiddens: 16, num_heads: 2, num_blks: 1}\n"
    "  decoder: {plugin: transformer, num_hiddens: 16, num_heads: 2, num_blks: 1}\n";
const std::string kRegressionModel = "model: {plugin: seq2seq_regression, num_hiddens: 6, num_heads: 3}\n";

INSTANTIATE_TEST_SUITE_P(
    PluginSeam, PairingTest,
    ::testing::Values(
        Pairing{"RegressionTrainerWithEncoderDecoder", kTokens + kTransformers + "trainer: {plugin: regression}\n",
                {"trainer 'regression'", "encoder 'transformer' + decoder 'transformer'", "synthetic_tokens"}},
        Pairing{"D2l017TrainerWithAModelPlugin", kCorners + kRegressionModel + "trainer: {plugin: seq2seq_d2l017}\n",
                {"trainer 'seq2seq_d2l017'", "model 'seq2seq_regression'", "corners"}},
        Pairing{"Seq2seqTrainerWithoutAModel", kTokens + "trainer: {plugin: seq2seq}\n",
                {"trainer 'seq2seq'", "no model", "encoder + decoder"}},
        Pairing{"NadarayaWatsonWithAModel",
                "dataset: {plugin: kernel_regression}\n" + kRegressionModel + "trainer: {plugin: nadaraya_watson}\n",
                {"trainer 'nadaraya_watson'", "model 'seq2seq_regression'"}},
        Pairing{"RegressionModelOnTokens", kTokens + kRegressionModel + "trainer: {plugin: regression}\n",
                {"seq2seq_regression"}}),
    [](const ::testing::TestParamInfo<Pairing>& info) { return info.param.what; });

// Scans of a plugin path (issue 42). A library whose static constructor calls abort() used to kill
// `runner plugins` and every run whose plugin path held it (SIGABRT): it is probed in a forked copy.
class PluginScanTest : public PluginSeamTest {
 protected:
  void SetUp() override {
    PluginSeamTest::SetUp();
    if (HasFatalFailure()) return;
    // A cache of this test's own, and a log of the libraries probed in a child.
    ::setenv("ATTNLAB_CACHE", (tmp_ + "/cache").c_str(), 1);
    ::setenv("ATTNLAB_PLUGIN_PROBE_LOG", probe_log().c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("ATTNLAB_CACHE");
    ::unsetenv("ATTNLAB_PLUGIN_PROBE_LOG");
  }
  std::string probe_log() const { return tmp_ + "/probes.log"; }
  /// The libraries probed in a child since the log was last cleared, one per line; the cache's
  /// writes in that time (the log's "cache written" lines) into cache_writes.
  std::vector<std::string> probed() {
    std::vector<std::string> out;
    cache_writes = 0;
    std::ifstream in(probe_log());
    for (std::string line; std::getline(in, line);) {
      if (line == "cache written") {
        ++cache_writes;
      } else {
        out.push_back(line);
      }
    }
    fs::remove(probe_log());
    return out;
  }
  int cache_writes = 0;
  std::string aborting_folder() const {
    return fs::path(test_plugin("attnlab_scorer_test_aborting")).parent_path().string();
  }
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
};

TEST_F(PluginScanTest, ListingPluginsSkipsItWithOneWarning) {
  auto list = run({"plugins", "--plugin-path", aborting_folder()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("dot_product"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find(" test_aborting "), std::string::npos) << list.out;
  EXPECT_EQ(count(list.err, "\n"), 1u) << list.err;
  EXPECT_NE(list.err.find("libattnlab_scorer_test_aborting.so: loading it crashed (SIGABRT) in a separate probing "
                          "process"),
            std::string::npos)
      << list.err;
  // Asked for by name: why it was skipped, in one line after the warning, not "no plugin named".
  auto one = run({"plugins", "test_aborting", "--plugin-path", aborting_folder()});
  expect_one_error_line({one.exit_code, one.out, last_line(one.err)},
                        "plugin error: scorer plugin 'test_aborting' "
                        "is provided by ");
  EXPECT_NE(last_line(one.err).find("libattnlab_scorer_test_aborting.so"), std::string::npos) << one.err;
  EXPECT_NE(last_line(one.err).find("SIGABRT"), std::string::npos) << one.err;
  EXPECT_EQ(one.err.find("no plugin named"), std::string::npos) << one.err;
}

// The same library under a file name that says nothing of what it provides: asking for its plugin
// names the skipped library as a candidate, in the run's error and in `runner plugins NAME`.
TEST_F(PluginScanTest, ASkippedLibraryUnderAnotherNameIsNamedAsACandidate) {
  auto dir = tmp_ + "/renamed";
  fs::create_directories(dir);
  fs::copy_file(test_plugin("attnlab_scorer_test_aborting"), dir + "/libattnlab_scorer_misnamed.so");
  auto one = run({"plugins", "test_aborting", "--plugin-path", dir});
  expect_one_error_line({one.exit_code, one.out, last_line(one.err)}, "plugin error: no plugin named 'test_aborting'");
  EXPECT_NE(last_line(one.err).find("1 plugin library could not be loaded and may provide it (see the warning above): " +
                                    dir + "/libattnlab_scorer_misnamed.so"),
            std::string::npos)
      << one.err;
  auto asks = run({"experiments/tests/tiny_corners.yaml", "--plugin-path", dir, "model.attention.scorer=test_aborting",
                   "--results", tmp_ + "/never.h5"});
  expect_one_error_line({asks.exit_code, asks.out, last_line(asks.err)}, "config error: ");
  EXPECT_NE(last_line(asks.err).find("could not be loaded and may provide it"), std::string::npos) << asks.err;
  EXPECT_NE(last_line(asks.err).find("libattnlab_scorer_misnamed.so"), std::string::npos) << asks.err;
  // A relative --plugin-path is shown as the absolute folder it named, without `..`.
  auto rel = run({"plugins", "nosuch", "--plugin-path", dir + "/../renamed"});
  EXPECT_NE(last_line(rel.err).find("searched: " + dir + ", "), std::string::npos) << rel.err;
}

TEST_F(PluginScanTest, ARunThatDoesNotAskForItCompletesOneThatDoesSaysWhy) {
  auto results = tmp_ + "/synthetic.h5";
  auto r = run(testutil::tiny_synthetic(results, {"--plugin-path", aborting_folder(), "-q"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("SIGABRT"), std::string::npos) << r.err;
  EXPECT_EQ(results::ResultsReader(results).status(), results::Status::Completed);
  auto asks = run({"experiments/tests/tiny_corners.yaml", "--plugin-path", aborting_folder(),
                   "model.attention.scorer=test_aborting", "--results", tmp_ + "/never.h5"});
  expect_one_error_line({asks.exit_code, asks.out, last_line(asks.err)}, "config error: ");
  EXPECT_NE(last_line(asks.err).find("which could not be loaded: "), std::string::npos) << asks.err;
  EXPECT_NE(last_line(asks.err).find("libattnlab_scorer_test_aborting.so: loading it crashed (SIGABRT)"),
            std::string::npos)
      << asks.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(PluginScanTest, ProbesAreCachedAndAChangedLibraryIsProbedAgain) {
  auto dir = tmp_ + "/mixed";
  fs::create_directories(dir);
  fs::copy_file(test_plugin("attnlab_scorer_test_good"), dir + "/libattnlab_scorer_test_good.so");
  fs::copy_file(test_plugin("attnlab_scorer_test_aborting"), dir + "/libattnlab_scorer_test_aborting.so");
  auto first = run({"plugins", "--plugin-path", dir});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("test_scorer"), std::string::npos) << first.out;
  auto probes = probed();
  EXPECT_NE(std::find(probes.begin(), probes.end(), dir + "/libattnlab_scorer_test_good.so"), probes.end());
  EXPECT_GT(probes.size(), 10u) << "every library of the build's own folder is probed once";
  EXPECT_TRUE(fs::exists(tmp_ + "/cache/plugin-probes.tsv"));
  EXPECT_EQ(cache_writes, 1) << "the cache is written once per scan, not once per library";
  // The second scan forks for the aborting library only (a crash is never cached): the healthy
  // ones are dlopen-ed directly.
  auto second = run({"plugins", "--plugin-path", dir});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err, first.err);
  EXPECT_EQ(probed(), std::vector<std::string>{dir + "/libattnlab_scorer_test_aborting.so"});
  EXPECT_EQ(cache_writes, 0) << "nothing new was learned";
  // A library that changed (here only its mtime) is probed again, and only it.
  fs::last_write_time(dir + "/libattnlab_scorer_test_good.so",
                      fs::last_write_time(dir + "/libattnlab_scorer_test_good.so") + std::chrono::seconds(5));
  auto third = run({"plugins", "--plugin-path", dir});
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(probed(), (std::vector<std::string>{dir + "/libattnlab_scorer_test_aborting.so",
                                                dir + "/libattnlab_scorer_test_good.so"}));
  EXPECT_EQ(cache_writes, 1);
  // That write kept what the first one learned: a fourth scan probes the aborting library only.
  auto fourth = run({"plugins", "--plugin-path", dir});
  ASSERT_EQ(fourth.exit_code, 0) << fourth.err;
  EXPECT_EQ(probed(), std::vector<std::string>{dir + "/libattnlab_scorer_test_aborting.so"});
}

TEST_F(PluginScanTest, AFolderOnThePathTwiceGivesOneWarningForItsDuplicates) {
  // The build's own plugins under a second name: every one of them is claimed twice.
  auto copy = tmp_ + "/copy";
  fs::copy(testutil::env_or("ATTNLAB_PLUGIN_PATH", ""), copy);
  auto list = run({"plugins", "--plugin-path", copy});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(std::count(list.err.begin(), list.err.end(), '\n'), 1) << list.err;
  EXPECT_NE(list.err.find("plugin libraries in "), std::string::npos) << list.err;
  EXPECT_NE(list.err.find("scorer 'dot_product'"), std::string::npos) << list.err;
}

}  // namespace
