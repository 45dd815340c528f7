// fra_eng without a mirror: the default sources (d2l's copy, then manythings.org), a zip pinned by
// the plugin's sha1 option, a newer 3-column manythings.org file accepted after its content
// checks (with a warning), `verify: strict`, wrong files, and the options' validation. Served by
// tests/testing/fetch_server.py on 127.0.0.1; no other network.
#include <attnlab/config/node.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include "fra_eng.hpp"
#include "testing/corpus.hpp"
#include "testing/http_server.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace attnlab;
using data::Split;
using datasets::fra_eng::FraEng;
using datasets::fra_eng::FraEngOptions;
using testutil::message_of;

int64_t rows(const std::vector<data::Batch>& batches) {
  int64_t n = 0;
  for (const auto& b : batches) n += b.src.size(0);
  return n;
}

/// Loads the built fra_eng plugin; false (a test failure) when ATTNLAB_PLUGIN_PATH is not set.
bool load_fra_eng(plugin::Registry& registry) {
  const std::string dir = testutil::env_or("ATTNLAB_PLUGIN_PATH", "");
  EXPECT_FALSE(dir.empty()) << "ATTNLAB_PLUGIN_PATH not set (run through ctest)";
  if (dir.empty()) return false;
  registry.load((fs::path(dir) / "libattnlab_dataset_fra_eng.so").string());
  return true;
}

class FraEngUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testutil::temp_dir("attnlab-fra-upstream");
    www_ = root_ / "www";
    data_ = root_ / "data";
    // d2l's packaging: fra-eng/fra.txt (2 columns); a newer manythings.org one: fra.txt (3 columns).
    testutil::write_zip(www_ / "d2l/fra-eng.zip", {{"fra-eng/fra.txt", testutil::fra_text(700, false)}});
    testutil::write_zip(www_ / "anki/fra-eng.zip",
                        {{"_about.txt", "manythings.org"}, {"fra.txt", testutil::fra_text(700, true)}});
    server_ = std::make_unique<testutil::HttpServer>(www_.string());
    ASSERT_NE(server_->port(), 0) << "tests/testing/fetch_server.py did not start (python3 or ATTNLAB_SOURCE_DIR missing)";
  }
  std::string zip_sha256(const std::string& path) const { return data::sha256_file((www_ / path).string()); }
  FraEngOptions from(const std::string& path) const {
    FraEngOptions o;
    o.urls = {server_->url(path)};
    return o;
  }

  fs::path root_, www_, data_;
  std::unique_ptr<testutil::HttpServer> server_;
  testutil::ScopedEnv no_mirror_{"ATTNLAB_DATA_MIRROR", std::nullopt};
};

TEST(FraEngSources, D2lsCopyFirstThenManythingsAndBothPackagingsPinned) {
  const FraEngOptions o;
  EXPECT_EQ(o.urls, (std::vector<std::string>{"http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
                                               "https://www.manythings.org/anki/fra-eng.zip"}));
  EXPECT_EQ(o.sums, (std::vector<std::string>{"94646ad1522d915e7b0f9296181140edcf86a4f5",
                                               "161c93f18da3a7e6df611ed961426613260de8af06ccf8c79c977afe5135ac44"}));
  EXPECT_FALSE(o.strict);
}

TEST_F(FraEngUpstreamTest, D2lStyleZipPinnedBySha1ThroughThePluginOption) {
  plugin::Registry registry;
  ASSERT_TRUE(load_fra_eng(registry));
  plugin::BuildContext ctx;
  const std::string sha1 = data::sha1_file((www_ / "d2l/fra-eng.zip").string());
  auto ds = registry.create<data::Dataset>(
      config::parse_yaml(fmt::format("plugin: fra_eng\nurl: {}\nsha1: {}\n", server_->url("d2l/fra-eng.zip"), sha1),
                         "exp.yaml"),
      ctx);
  ::testing::internal::CaptureStderr();
  ds->prepare(data_.string());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;  // pinned: accepted silently
  EXPECT_EQ(data::sha1_file((data_ / "fra-eng/fra-eng.zip").string()), sha1);
  EXPECT_EQ(rows(ds->batches(Split::Train, false, 0)), 512);
  EXPECT_EQ(rows(ds->batches(Split::Val, false, 0)), 129);  // d2l's off-by-one
}

TEST_F(FraEngUpstreamTest, NewerThreeColumnFileIsAcceptedWithAWarningAndReadAsTheTwoColumnOne) {
  FraEng three(from("anki/fra-eng.zip"));
  ::testing::internal::CaptureStderr();
  three.prepare(data_.string());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: fra-eng/fra-eng.zip from " + server_->url("anki/fra-eng.zip") +
                     " matches no pinned checksum"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("found " + zip_sha256("anki/fra-eng.zip") + " (SHA-256)"), std::string::npos) << err;

  FraEng two{FraEngOptions{}};
  two.prepare_from_text(testutil::fra_text(700, false));
  for (Split split : {Split::Train, Split::Val}) {
    EXPECT_EQ(three.raw_sources(split), two.raw_sources(split));
    EXPECT_EQ(three.raw_targets(split), two.raw_targets(split));
    const auto a = three.batches(split, false, 0), b = two.batches(split, false, 0);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i].src, b[i].src));
      EXPECT_TRUE(torch::equal(a[i].tgt_out, b[i].tgt_out));
    }
  }
  EXPECT_EQ(three.raw_targets(Split::Train)[1], "salut !");  // the second column, not the attribution
  EXPECT_EQ(three.info().tgt_vocab_size, two.info().tgt_vocab_size);
}

TEST_F(FraEngUpstreamTest, StrictRefusesAFileNoPinnedChecksumMatches) {
  FraEngOptions o = from("anki/fra-eng.zip");
  o.strict = true;
  const std::string msg = message_of<DataError>([&] { FraEng(o).prepare(data_.string()); });
  EXPECT_NE(msg.find("checksum mismatch for fra-eng/fra-eng.zip from " + server_->url("anki/fra-eng.zip")),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(std::string("expected ") + datasets::fra_eng::kD2lSha1 + " (SHA-1) or " +
                     datasets::fra_eng::kSha256 + " (SHA-256)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("found " + zip_sha256("anki/fra-eng.zip")), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "fra-eng/fra-eng.zip"));
}

TEST_F(FraEngUpstreamTest, WrongFileIsRefusedNamingUrlChecksumsAndWhy) {
  testutil::write_zip(www_ / "bad/fra-eng.zip", {{"fra.txt", "Hello.\tBonjour.\n" + testutil::fra_text(700, false)}});
  const std::string msg = message_of<DataError>([&] { FraEng(from("bad/fra-eng.zip")).prepare(data_.string()); });
  EXPECT_NE(msg.find("from " + server_->url("bad/fra-eng.zip")), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string("expected ") + datasets::fra_eng::kD2lSha1), std::string::npos) << msg;
  EXPECT_NE(msg.find("found " + zip_sha256("bad/fra-eng.zip")), std::string::npos) << msg;
  EXPECT_NE(msg.find("its fra.txt starts with 'Hello.\tBonjour.'"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "fra-eng/fra-eng.zip"));
}

TEST_F(FraEngUpstreamTest, ContentChecks) {
  const auto check = [&](const std::string& name, const std::string& text) {
    testutil::write_zip(root_ / name, {{"fra-eng/fra.txt", text}});
    return datasets::fra_eng::check_contents((root_ / name).string());
  };
  EXPECT_EQ(check("two.zip", testutil::fra_text(641, false)), "");
  EXPECT_EQ(check("three.zip", testutil::fra_text(641, true)), "");
  EXPECT_EQ(check("short.zip", testutil::fra_text(640, false)), "its fra.txt has 640 lines, d2l's split needs 641");
  std::string ragged = testutil::fra_text(700, true);
  ragged.insert(ragged.find('\n') + 1, "Hi.\tSalut !\n");  // line 2 lacks the attribution column
  EXPECT_EQ(check("ragged.zip", ragged), "line 2 of its fra.txt does not have the 3 tab-separated columns of line 1");
  EXPECT_EQ(check("latin1.zip", "Go.\tVa !\nI won!\tJ'ai gagn\xe9 !\n"),
            "fra-eng/fra.txt:2: invalid UTF-8 at byte 25 (byte 17 of the line): byte 0xe9 starts a 3-byte "
            "character, but its byte 2 is 0x20 (not 0x80-0xbf)");
  testutil::write_zip(root_ / "empty.zip", {{"_about.txt", "nothing"}});
  EXPECT_NE(datasets::fra_eng::check_contents((root_ / "empty.zip").string()).find("no fra.txt member"),
            std::string::npos);
}

TEST_F(FraEngUpstreamTest, InvalidUtf8NamesTheZipItsMemberAndTheLine) {
  // A corpus accepted by its checksum but holding a Latin-1 byte on line 3: the DataError named
  // neither the file nor the line.
  std::string text = testutil::fra_text(700, false);
  const size_t line3 = text.find('\n', text.find('\n') + 1) + 1;
  text.insert(line3 + 2, "\xe9");
  const fs::path zip = data_ / "fra-eng/fra-eng.zip";
  testutil::write_zip(zip, {{"fra-eng/fra.txt", text}});
  FraEngOptions o;
  o.urls = {};
  o.sums = {data::sha256_file(zip.string())};
  EXPECT_EQ(message_of<DataError>([&] { FraEng(o).prepare(data_.string()); }),
            fmt::format("{}:fra-eng/fra.txt:3: invalid UTF-8 at byte {} (byte 3 of the line): byte 0xe9 starts a "
                        "3-byte character, but its byte 2 is 0x6e (not 0x80-0xbf)",
                        zip.string(), line3 + 2));
  // Downloaded and matching no pin: the content check says where.
  testutil::write_zip(www_ / "latin/fra-eng.zip", {{"fra-eng/fra.txt", text}});
  const std::string msg =
      message_of<DataError>([&] { FraEng(from("latin/fra-eng.zip")).prepare((root_ / "d2").string()); });
  EXPECT_NE(msg.find(fmt::format("its content is not usable: fra-eng/fra.txt:3: invalid UTF-8 at byte {}", line3 + 2)),
            std::string::npos)
      << msg;
}

TEST(FraEngTokenize, TwoColumnFileKeepsD2lsExactlyOneTabRule) {
  std::vector<datasets::fra_eng::Tokens> src, tgt;
  datasets::fra_eng::tokenize_pairs("go .\tva !\na\tb\tc\nhi .\tsalut !", 0, src, tgt);
  ASSERT_EQ(src.size(), 2u);  // the line with two tabs is no pair, as in d2l
  EXPECT_EQ(tgt[1], (datasets::fra_eng::Tokens{"salut", "!", "<eos>"}));
}

TEST(FraEngOptionsCheck, BadValuesAreConfigErrorsAtTheirPlace) {
  plugin::Registry registry;
  ASSERT_TRUE(load_fra_eng(registry));
  plugin::BuildContext ctx;
  const auto error = [&](const std::string& yaml) {
    return message_of<ConfigError>(
        [&] { registry.create<data::Dataset>(config::parse_yaml("plugin: fra_eng\n" + yaml, "exp.yaml"), ctx); });
  };
  std::string msg = error("sha1: 94646ad1\n");
  EXPECT_NE(msg.find("exp.yaml:2:7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'94646ad1' is not a SHA-1 (40 lowercase hex digits)"), std::string::npos) << msg;
  msg = error(std::string("sha256: ") + datasets::fra_eng::kD2lSha1 + "\n");
  EXPECT_NE(msg.find("exp.yaml:2:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is not a SHA-256 (64 lowercase hex digits)"), std::string::npos) << msg;
  msg = error("url: ftp://example.org/fra-eng.zip\n");
  EXPECT_NE(msg.find("exp.yaml:2:6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is not an http://, https:// or file:// URL"), std::string::npos) << msg;
  msg = error("verify: lenient\n");
  EXPECT_NE(msg.find("exp.yaml:2:9"), std::string::npos) << msg;
}

}  // namespace
