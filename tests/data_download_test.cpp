// ensure_file's real download path: libcurl over HTTP against tests/testing/fetch_server.py on
// 127.0.0.1 (User-Agent required, 404s, redirects, dropped connections), pinned SHA-1 / SHA-256
// sums, the content check for unpinned files, progress for large files only.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>

#include "testing/corpus.hpp"
#include "testing/http_server.hpp"
#include "testing/testing.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;
using attnlab::DataError;
using attnlab::testutil::message_of;
using namespace attnlab::data;

using attnlab::testutil::has_part_files;
using attnlab::testutil::write_file;

std::string slurp(const std::string& p) { return read_text_file(p); }

/// Bytes that do not compress and have no structure: `n` of them, seeded.
std::string noise(size_t n) {
  std::mt19937 gen(7);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}


class DownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = attnlab::testutil::temp_dir("attnlab-download");
    www_ = root_ / "www";
    data_ = root_ / "data";
    write_file(www_ / "f.bin", noise(200000));
    server_ = std::make_unique<attnlab::testutil::HttpServer>(www_.string());
    ASSERT_NE(server_->port(), 0) << "tests/testing/fetch_server.py did not start (python3 or ATTNLAB_SOURCE_DIR missing)";
  }
  /// f.bin from `urls`, pinned by its SHA-1; fast retries.
  RemoteFile f_bin(std::vector<std::string> urls) const {
    RemoteFile f{"set/f.bin", std::move(urls), {sha1_file((www_ / "f.bin").string())}};
    f.backoff_ms = 1;
    return f;
  }
  std::string url(const std::string& path) const { return server_->url(path); }
  std::string fetch(const RemoteFile& f) const { return ensure_file(f, data_.string()); }

  fs::path root_, www_, data_;
  std::unique_ptr<attnlab::testutil::HttpServer> server_;
  attnlab::testutil::ScopedEnv no_mirror_{"ATTNLAB_DATA_MIRROR", std::nullopt};
};

TEST_F(DownloadTest, SendsItsUserAgent) {
  // The server refuses any request without a User-Agent (403) and echoes it at /ua.
  EXPECT_EQ(slurp(fetch({"ua.txt", {url("ua")}, {}})), "attnlab/0.1");
  EXPECT_EQ(slurp(fetch(f_bin({url("f.bin")}))), slurp((www_ / "f.bin").string()));
}

TEST_F(DownloadTest, PinnedSha1OrSha256IsAccepted) {
  EXPECT_EQ(fs::path(fetch(f_bin({url("f.bin")}))), data_ / "set/f.bin");
  RemoteFile by_sha256{"other/f.bin", {url("f.bin")}, {std::string(40, '0'), sha256_file((www_ / "f.bin").string())}};
  EXPECT_EQ(slurp(fetch(by_sha256)), slurp((www_ / "f.bin").string()));
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(DownloadTest, WrongFileIsRefusedNamingUrlAndBothChecksums) {
  const std::string sha1 = std::string(40, '1'), sha256 = std::string(64, '2');
  const RemoteFile f{"set/f.bin", {url("f.bin")}, {sha1, sha256}};
  const std::string msg = message_of<DataError>([&] { fetch(f); });
  EXPECT_NE(msg.find("checksum mismatch for set/f.bin from " + url("f.bin")), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected " + sha1 + " (SHA-1) or " + sha256 + " (SHA-256)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found " + sha256_file((www_ / "f.bin").string()) + " (SHA-256), " +
                     sha1_file((www_ / "f.bin").string()) + " (SHA-1)"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/f.bin"));
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(DownloadTest, NotFoundOnTheFirstUrlThenTheSecond) {
  EXPECT_EQ(slurp(fetch(f_bin({url("missing/f.bin"), url("f.bin")}))), slurp((www_ / "f.bin").string()));
}

TEST_F(DownloadTest, EveryUrlTriedIsNamedWithWhyItFailed) {
  write_file(www_ / "other.bin", "not f.bin");
  const std::string msg = message_of<DataError>([&] { fetch(f_bin({url("missing/f.bin"), url("other.bin")})); });
  EXPECT_NE(msg.find("cannot get set/f.bin into " + data_.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("1) download of set/f.bin from " + url("missing/f.bin") + " failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HTTP 404"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2) checksum mismatch for set/f.bin from " + url("other.bin")), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/f.bin"));
}

TEST_F(DownloadTest, FollowsRedirects) {
  EXPECT_EQ(slurp(fetch(f_bin({url("redirect/f.bin")}))), slurp((www_ / "f.bin").string()));
}

TEST_F(DownloadTest, DroppedTransferIsResumed) {
  // The first response stops after half the announced bytes; the retry asks for the rest.
  EXPECT_EQ(slurp(fetch(f_bin({url("drop/f.bin")}))), slurp((www_ / "f.bin").string()));
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(DownloadTest, TransferDroppedEveryTimeFailsClearlyAndLeavesNoHalfFile) {
  RemoteFile f = f_bin({url("dropalways/f.bin")});
  f.attempts = 3;
  const std::string msg = message_of<DataError>([&] { fetch(f); });
  EXPECT_NE(msg.find("download of set/f.bin from " + url("dropalways/f.bin") + " failed (3 attempts)"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/f.bin"));
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(DownloadTest, UnpinnedFileAcceptedByTheContentCheckWithOneWarning) {
  RemoteFile f{"set/f.bin", {url("f.bin")}, {std::string(64, '0')}};
  f.content_check = [](const std::string&) { return std::string(); };
  const std::string found = sha256_file((www_ / "f.bin").string());
  ::testing::internal::CaptureStderr();
  fetch(f);
  fetch(f);  // the verified copy in the data dir: no second warning
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: set/f.bin from " + url("f.bin") + " matches no pinned checksum"), std::string::npos)
      << err;
  EXPECT_NE(err.find("found " + found + " (SHA-256)"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning:"), err.rfind("warning:")) << err;

  RemoteFile refused{"set/g.bin", {url("f.bin")}, {std::string(64, '0')}};
  refused.content_check = [](const std::string&) { return std::string("no fra.txt in it"); };
  const std::string msg = message_of<DataError>([&] { fetch(refused); });
  EXPECT_NE(msg.find("found " + found), std::string::npos) << msg;
  EXPECT_NE(msg.find("its content is not usable: no fra.txt in it"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/g.bin"));
}

TEST_F(DownloadTest, ProgressOnStderrForLargeFilesOnly) {
  ::testing::internal::CaptureStderr();
  fetch(f_bin({url("f.bin")}));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  write_file(www_ / "big.bin", noise(5 << 20));
  ::testing::internal::CaptureStderr();
  fetch({"set/big.bin", {url("big.bin")}, {sha256_file((www_ / "big.bin").string())}});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("set/big.bin: "), std::string::npos) << err;
  EXPECT_NE(err.find("of 5.2 MB (100%)\n"), std::string::npos) << err;
}

TEST_F(DownloadTest, ChecksumsAndUrlsAreValidated) {
  EXPECT_EQ(checksum_kind(std::string(40, 'a')), "SHA-1");
  EXPECT_EQ(checksum_kind(std::string(64, '9')), "SHA-256");
  EXPECT_EQ(checksum_kind(std::string(64, 'A')), "");  // lowercase only
  EXPECT_EQ(checksum_kind("abc"), "");
  EXPECT_EQ(url_problem(url("f.bin")), "");
  EXPECT_EQ(url_problem("file:///tmp/x"), "");
  EXPECT_NE(url_problem("ftp://example.org/x").find("'ftp://example.org/x' is not an http://"), std::string::npos);
  const std::string msg = message_of<DataError>([&] { fetch({"set/f.bin", {url("f.bin")}, {"abc"}}); });
  EXPECT_NE(msg.find("'abc'"), std::string::npos) << msg;
}

}  // namespace
