// multi30k's upstream sources: the default list (GitHub's raw view, then raw.githubusercontent.com),
// the url_base option replacing it with one folder, downloads over HTTP from
// tests/testing/fetch_server.py on 127.0.0.1 (a dropped transfer resumed), and clear errors.
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include "multi30k.hpp"
#include "testing/corpus.hpp"
#include "testing/http_server.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace attnlab;
using testutil::message_of;

TEST(Multi30kSources, GithubRawThenRawGithubusercontent) {
  EXPECT_EQ(datasets::multi30k::Multi30kOptions{}.url_bases,
            (std::vector<std::string>{"https://github.com/multi30k/dataset/raw/master/data/task1/raw",
                                      "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"}));
}

class Multi30kUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testutil::env_or("ATTNLAB_PLUGIN_PATH", "");
    ASSERT_FALSE(dir.empty()) << "ATTNLAB_PLUGIN_PATH not set (run through ctest)";
    for (const char* so : {"libattnlab_tokenizer_d2l_words.so", "libattnlab_dataset_multi30k.so"})
      registry_.load((fs::path(dir) / so).string());
    root_ = testutil::temp_dir("attnlab-m30k-upstream");
    // A tiny stand-in corpus (not the pinned files: created with verify: false).
    for (const char* stem : {"train", "val", "test_2016_flickr"}) {
      testutil::write_gzip(root_ / "www/m30k" / fmt::format("{}.de.gz", stem), "Ein Hund läuft.\nZwei Männer.\n");
      testutil::write_gzip(root_ / "www/m30k" / fmt::format("{}.en.gz", stem), "A dog runs.\nTwo men.\n");
    }
    server_ = std::make_unique<testutil::HttpServer>((root_ / "www").string());
    ASSERT_NE(server_->port(), 0) << "tests/testing/fetch_server.py did not start (python3 or ATTNLAB_SOURCE_DIR missing)";
  }
  std::shared_ptr<data::Dataset> make(const std::string& options) {
    plugin::BuildContext ctx;
    ctx.registry = &registry_;
    return registry_.create<data::Dataset>(
        config::parse_yaml("plugin: multi30k\nmin_freq: 1\n" + options, "exp.yaml"), ctx);
  }

  plugin::Registry registry_;
  fs::path root_;
  std::unique_ptr<testutil::HttpServer> server_;
  testutil::ScopedEnv no_mirror_{"ATTNLAB_DATA_MIRROR", std::nullopt};
};

TEST_F(Multi30kUpstreamTest, DownloadsFromTheGivenFolderResumingDroppedTransfers) {
  auto ds = make(fmt::format("verify: false\nurl_base: {}\n", server_->url("drop/m30k")));
  ds->prepare((root_ / "data").string());
  EXPECT_EQ(ds->raw_targets(data::Split::Val), (std::vector<std::string>{"A dog runs.", "Two men."}));
  EXPECT_TRUE(fs::exists(root_ / "data/multi30k/train.de.gz"));
}

TEST_F(Multi30kUpstreamTest, PinnedChecksumsRefuseOtherFilesNamingTheUrl) {
  auto ds = make(fmt::format("url_base: {}\n", server_->url("m30k")));
  const std::string msg = message_of<DataError>([&] { ds->prepare((root_ / "data").string()); });
  EXPECT_NE(msg.find("checksum mismatch for multi30k/train.de.gz from " + server_->url("m30k/train.de.gz")),
            std::string::npos)
      << msg;
  // train.de.gz's pinned SHA-256 (datasets/manifest.tsv)
  EXPECT_NE(msg.find("expected 726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6 (SHA-256)"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(root_ / "data/multi30k/train.de.gz"));
}

TEST_F(Multi30kUpstreamTest, MissingFileNamesTheUrlAndTheHttpStatus) {
  auto ds = make(fmt::format("verify: false\nurl_base: {}\n", server_->url("nowhere")));
  const std::string msg = message_of<DataError>([&] { ds->prepare((root_ / "data").string()); });
  EXPECT_NE(msg.find("download of multi30k/train.de.gz from " + server_->url("nowhere/train.de.gz")),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("HTTP 404"), std::string::npos) << msg;
}

TEST_F(Multi30kUpstreamTest, UrlBaseMustBeAUrl) {
  const std::string msg = message_of<ConfigError>([&] { make("url_base: /srv/multi30k\n"); });
  EXPECT_NE(msg.find("exp.yaml:3:11"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'/srv/multi30k' is not an http://, https:// or file:// URL"), std::string::npos) << msg;
}

}  // namespace
