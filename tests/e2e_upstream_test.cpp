// The README's main job on a fresh machine: the real runner binary, no ATTNLAB_DATA_MIRROR, the
// fra-eng zip downloaded over HTTP (tests/testing/fetch_server.py on 127.0.0.1) through ONE
// experiment override, dataset.url; and a bad download option as a ConfigError at its place.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "testing/corpus.hpp"
#include "testing/http_server.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
namespace fs = std::filesystem;
using namespace attnlab;

class UpstreamRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    ASSERT_FALSE(runner_.empty() || source_.empty()) << "ATTNLAB_RUNNER / ATTNLAB_SOURCE_DIR not set (run through ctest)";
    tmp_ = testutil::temp_dir("attnlab-e2e-upstream");
    testutil::write_zip(fs::path(tmp_) / "www/fra-eng.zip", {{"fra-eng/fra.txt", testutil::fra_text(700, false)}});
    server_ = std::make_unique<testutil::HttpServer>(tmp_ + "/www");
    ASSERT_NE(server_->port(), 0) << "tests/testing/fetch_server.py did not start (python3 missing?)";
  }
  testutil::ProcessResult run(const std::vector<std::string>& args) {
    return testutil::run_process(runner_, args, source_, tmp_);
  }

  std::string runner_, source_, tmp_;
  std::unique_ptr<testutil::HttpServer> server_;
  testutil::ScopedEnv no_mirror_{"ATTNLAB_DATA_MIRROR", std::nullopt};
};

TEST_F(UpstreamRunTest, DownloadsTheCorpusThroughOneOverrideAndTrains) {
  const std::string data = tmp_ + "/data";
  auto r = run({"experiments/tests/tiny_fra_eng.yaml", "--results", tmp_ + "/run.h5", "data_dir=" + data,
                "trainer.max_epochs=1", "dataset.url=" + server_->url("fra-eng.zip")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 1/1"), std::string::npos) << r.out;
  // The test's zip is no pinned packaging: accepted after the content checks, with a warning.
  EXPECT_NE(r.err.find("warning: fra-eng/fra-eng.zip from " + server_->url("fra-eng.zip") +
                       " matches no pinned checksum"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(data + "/fra-eng/fra-eng.zip"));
}

TEST_F(UpstreamRunTest, BadDownloadOptionIsAConfigErrorNamingItsPlace) {
  std::ofstream(tmp_ + "/bad.yaml") << "defaults: [" << source_ << "/experiments/tests/tiny_fra_eng.yaml]\n"
                                    << "dataset:\n  sha1: not-a-sum\n";
  auto r = run({tmp_ + "/bad.yaml", "--results", tmp_ + "/bad.h5", "data_dir=" + tmp_ + "/data"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.yaml:3:9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'not-a-sum' is not a SHA-1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/data/fra-eng/fra-eng.zip"));
}

}  // namespace
