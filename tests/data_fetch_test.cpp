// Fetching and reading dataset files: SHA-256, mirror copies (folder, file://, env), libcurl
// downloads (file:// URLs, no network needed), checksum mismatches, zip members, gzip errors.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>

#include "testing/corpus.hpp"
#include "testing/testing.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace data_fetch_test {

namespace {

namespace fs = std::filesystem;
using attnlab::DataError;
using namespace attnlab::data;

// sha256("abc"), FIPS 180-2 test vector.
constexpr const char* kAbcSha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

using attnlab::testutil::has_part_files;
using attnlab::testutil::write_file;

std::string slurp(const fs::path& p) { return read_text_file(p.string()); }

using attnlab::testutil::ScopedEnv;

/// Exception message of `f`, which must throw DataError.
template <class F>
std::string data_error(F f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return {};
}


class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = attnlab::testutil::temp_dir("attnlab-fetch");
    mirror_ = root_ / "mirror";
    data_ = root_ / "data";
    write_file(mirror_ / "set/abc.txt", "abc");
  }
  RemoteFile abc() const { return {"set/abc.txt", {}, {kAbcSha}}; }
  fs::path root_, mirror_, data_;
  ScopedEnv no_env_{"ATTNLAB_DATA_MIRROR", std::nullopt};
};

TEST_F(FetchTest, Sha256OfKnownContent) { EXPECT_EQ(sha256_file((mirror_ / "set/abc.txt").string()), kAbcSha); }

TEST_F(FetchTest, Sha256OfMissingFileNamesIt) {
  EXPECT_NE(data_error([&] { sha256_file((root_ / "nope.bin").string()); }).find("nope.bin"), std::string::npos);
}

TEST_F(FetchTest, CopiesFromMirrorFolderThenUsesTheCachedFile) {
  const std::string got = ensure_file(abc(), data_.string(), mirror_.string());
  EXPECT_EQ(fs::path(got), data_ / "set/abc.txt");
  EXPECT_EQ(slurp(got), "abc");
  fs::remove_all(mirror_);  // no source any more: the verified copy must be used as is
  EXPECT_EQ(ensure_file(abc(), data_.string()), got);
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(FetchTest, MirrorAsFileUrlAndFromEnvironment) {
  EXPECT_EQ(slurp(ensure_file(abc(), (root_ / "d1").string(), "file://" + mirror_.string())), "abc");
  ScopedEnv env("ATTNLAB_DATA_MIRROR", mirror_.string());
  EXPECT_EQ(slurp(ensure_file(abc(), (root_ / "d2").string())), "abc");
}

TEST_F(FetchTest, ReplacesACorruptLocalCopy) {
  write_file(data_ / "set/abc.txt", "abd");
  EXPECT_EQ(slurp(ensure_file(abc(), data_.string(), mirror_.string())), "abc");
}

TEST_F(FetchTest, ChecksumMismatchNamesFileSourceAndBothSums) {
  write_file(mirror_ / "set/abc.txt", "not abc");
  const std::string msg = data_error([&] { ensure_file(abc(), data_.string(), mirror_.string()); });
  EXPECT_NE(msg.find("checksum mismatch for set/abc.txt from " + (mirror_ / "set/abc.txt").string()),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(std::string("expected ") + kAbcSha), std::string::npos) << msg;
  EXPECT_NE(msg.find("found " + sha256_file((mirror_ / "set/abc.txt").string())), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/abc.txt"));  // nothing partial under the final name
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(FetchTest, DownloadsWithLibcurlWhenTheMirrorLacksTheFile) {
  const std::string url = "file://" + (mirror_ / "set/abc.txt").string();
  const RemoteFile f{"other/abc.txt", {url}, {kAbcSha}};
  EXPECT_EQ(slurp(ensure_file(f, data_.string(), (root_ / "empty-mirror").string())), "abc");
}

TEST_F(FetchTest, DownloadFailureNamesFileAndUrl) {
  const RemoteFile f{"set/abc.txt", {"file://" + (root_ / "missing.txt").string()}, {kAbcSha}};
  const std::string msg = data_error([&] { ensure_file(f, data_.string()); });
  EXPECT_NE(msg.find("set/abc.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find(f.urls[0]), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(data_ / "set/abc.txt"));
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

TEST_F(FetchTest, DownloadedChecksumMismatch) {
  const RemoteFile f{"x/abc.txt", {"file://" + (mirror_ / "set/abc.txt").string()}, {std::string(64, '0')}};
  const std::string msg = data_error([&] { ensure_file(f, data_.string()); });
  EXPECT_NE(msg.find("checksum mismatch for x/abc.txt from " + f.urls[0]), std::string::npos) << msg;
}

TEST_F(FetchTest, NoSourceAtAll) {
  const RemoteFile f{"set/abc.txt", {}, {kAbcSha}};
  const std::string msg = data_error([&] { ensure_file(f, data_.string()); });
  EXPECT_NE(msg.find("set/abc.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ATTNLAB_DATA_MIRROR"), std::string::npos) << msg;
}

using attnlab::testutil::write_zip;

TEST_F(FetchTest, ZipMembers) {
  const fs::path zip = root_ / "pairs.zip";
  const std::string text = "Go.\tVa !\nHi.\tSalut !\n";
  write_zip(zip, {{"pairs/fra.txt", text}, {"__MACOSX/pairs/._fra.txt", "junk"}, {"pairs/empty.txt", ""}});
  EXPECT_EQ(list_zip_members(zip.string()),
            (std::vector<std::string>{"pairs/fra.txt", "__MACOSX/pairs/._fra.txt", "pairs/empty.txt"}));
  EXPECT_EQ(read_zip_member(zip.string(), "pairs/fra.txt"), text);
  EXPECT_EQ(read_zip_member(zip.string(), "pairs/empty.txt"), "");
  const std::string msg = data_error([&] { read_zip_member(zip.string(), "fra-eng/fra.txt"); });
  EXPECT_NE(msg.find(zip.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fra-eng/fra.txt'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pairs/fra.txt, __MACOSX/pairs/._fra.txt"), std::string::npos) << msg;
}

TEST_F(FetchTest, ZipThroughMirrorWithChecksum) {
  write_zip(mirror_ / "set/pairs.zip", {{"a.txt", "alpha"}});
  const RemoteFile f{"set/pairs.zip", {}, {sha256_file((mirror_ / "set/pairs.zip").string())}};
  EXPECT_EQ(read_zip_member(ensure_file(f, data_.string(), mirror_.string()), "a.txt"), "alpha");
}

TEST_F(FetchTest, NotAZipNamesTheFile) {
  const std::string msg = data_error([&] { list_zip_members((mirror_ / "set/abc.txt").string()); });
  EXPECT_NE(msg.find("abc.txt"), std::string::npos) << msg;
}

using attnlab::testutil::write_gzip;

TEST_F(FetchTest, GzipRoundTripAndPlainFiles) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "A man in an orange hat starring at something.\n";
  write_gzip(root_ / "train.en.gz", text);
  EXPECT_EQ(read_text_file((root_ / "train.en.gz").string()), text);
  EXPECT_EQ(read_text_file((mirror_ / "set/abc.txt").string()), "abc");
}

TEST_F(FetchTest, TruncatedGzipIsDataErrorNamingTheFile) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += fmt::format("line {} of a long file\n", i);
  const fs::path full = root_ / "full.gz", cut = root_ / "cut.gz";
  write_gzip(full, text);
  std::ifstream in(full, std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(cut, raw.substr(0, raw.size() / 2));
  const std::string msg = data_error([&] { read_text_file(cut.string()); });
  EXPECT_NE(msg.find(cut.string()), std::string::npos) << msg;
  // Only the trailer (CRC + length) missing is still truncation.
  write_file(cut, raw.substr(0, raw.size() - 4));
  EXPECT_THROW(read_text_file(cut.string()), DataError);
}

TEST_F(FetchTest, GzipThatInflatesPastTheCapIsRefusedNamingItAndTheCap) {
  // A "bomb": 1 MiB on disk that inflates to 1 GiB + 1 byte. gzip streams may be concatenated
  // (zlib reads them as one file), so one 64 MiB member of zeros is written 16 times and a last
  // member holds one byte: the file inflates to exactly kMaxTextBytes + 1.
  static_assert(kMaxTextBytes % (64u << 20) == 0);
  const fs::path bomb = root_ / "bomb.en.gz", one = root_ / "one.gz";
  write_gzip(one, std::string(64u << 20, '\0'));
  std::ifstream in(one, std::ios::binary);
  const std::string member((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_LT(member.size(), 1u << 20);
  std::string bytes;
  for (std::uint64_t i = 0; i < kMaxTextBytes / (64u << 20); ++i) bytes += member;
  write_gzip(root_ / "last.gz", "x");
  std::ifstream last(root_ / "last.gz", std::ios::binary);
  bytes.append(std::istreambuf_iterator<char>(last), std::istreambuf_iterator<char>());
  write_file(bomb, bytes);
  EXPECT_EQ(data_error([&] { slurp(bomb); }),
            fmt::format("{} decompresses to more than the {} bytes a dataset file may have", bomb.string(),
                        kMaxTextBytes));
  // Concatenated members under the cap read whole: the check counts bytes, not members.
  write_file(root_ / "two.gz", member + member);
  EXPECT_EQ(slurp(root_ / "two.gz").size(), 2 * (64u << 20));
}

TEST_F(FetchTest, NonGzipWithGzSuffixAndMissingFiles) {
  write_file(root_ / "plain.gz", "just text\n");
  EXPECT_NE(data_error([&] { read_text_file((root_ / "plain.gz").string()); }).find("plain.gz"), std::string::npos);
  EXPECT_NE(data_error([&] { read_text_file((root_ / "none.txt").string()); }).find("none.txt"), std::string::npos);
  EXPECT_NE(data_error([&] { read_text_file((root_ / "none.gz").string()); }).find("none.gz"), std::string::npos);
}

TEST_F(FetchTest, NonRegularFilesAndSymlinkLoopsAreNamedNotRead) {
  // /dev/zero read until std::bad_alloc, a FIFO blocked forever, a loop gave a bare system error.
  const fs::path fifo = root_ / "fifo.txt", loop = root_ / "loop.gz";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink("loop.gz", loop.c_str()), 0);
  EXPECT_EQ(data_error([&] { slurp(fifo); }),
            "cannot read " + fifo.string() + ": it is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(data_error([&] { slurp("/dev/zero"); }), "cannot read /dev/zero: it is a device, not a regular file");
  EXPECT_EQ(data_error([&] { slurp(loop); }), "cannot read " + loop.string() + ": it is a symlink loop");
  EXPECT_EQ(data_error([&] { list_zip_members("/dev/zero"); }),
            "cannot read /dev/zero: it is a device, not a regular file");
  EXPECT_EQ(data_error([&] { read_zip_member(loop.string(), "a.txt"); }),
            "cannot read " + loop.string() + ": it is a symlink loop");
}

TEST_F(FetchTest, ZipClaimingAHugeMemberIsReadWithoutAllocatingIt) {
  // Fuzz finding (archive/regress-zip-claimed-size.zip): a 286-byte zip whose directory claims a
  // 2.3 GB member made read_zip_member allocate and zero 2.3 GB before reading anything.
  const std::string source = attnlab::testutil::env_or("ATTNLAB_SOURCE_DIR", "");
  ATTNLAB_REQUIRE(!source.empty(), "ATTNLAB_SOURCE_DIR is not set (run through ctest)");
  std::ifstream in(source + "/fuzz/corpus/archive/regress-zip-claimed-size.zip", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 286u);
  const fs::path claimed = root_ / "claimed.zip";
  write_file(claimed, bytes);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  // Over kMaxTextBytes: refused as the directory says it, before reading.
  EXPECT_EQ(data_error([&] { read_zip_member(claimed.string(), "fra-eng/fra.txt"); }),
            fmt::format("'fra-eng/fra.txt' in zip archive {} has 2365587561 bytes (as its directory says), more "
                        "than the {} a dataset file may have",
                        claimed.string(), kMaxTextBytes));
  // Under it (the central directory's size field set to 900 MB): read piece by piece until the
  // data ends, never allocated at the claimed size.
  const size_t cd = bytes.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  const uint32_t size = 900000000;
  for (int i = 0; i < 4; ++i) bytes[cd + 24 + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  const fs::path under = root_ / "under.zip";
  write_file(under, bytes);
  const std::string msg = data_error([&] { read_zip_member(under.string(), "fra-eng/fra.txt"); });
  EXPECT_NE(msg.find("cannot read 'fra-eng/fra.txt' in zip archive " + under.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("of 900000000 bytes read"), std::string::npos) << msg;
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "KiB of peak memory grown reading the two zips";
}

TEST_F(FetchTest, MirrorAndDataDirThatAreNoFoldersAreNamed) {
  const fs::path loop = root_ / "loop";
  ASSERT_EQ(::symlink("loop", loop.c_str()), 0);
  EXPECT_EQ(
      data_error([&] { ensure_file(abc(), data_.string(), loop.string()); }),
      "cannot use the data mirror " + loop.string() + " (ATTNLAB_DATA_MIRROR) for set/abc.txt: it is a symlink loop");
  EXPECT_EQ(data_error([&] { ensure_file(abc(), loop.string(), mirror_.string()); }),
            "cannot use the data dir " + loop.string() + " for set/abc.txt: it is a symlink loop");
  EXPECT_EQ(data_error([&] { ensure_file(abc(), (mirror_ / "set/abc.txt").string(), mirror_.string()); }),
            "cannot use the data dir " + (mirror_ / "set/abc.txt").string() +
                " for set/abc.txt: it is a regular file, not a directory");
  // A mirror entry that is a device or a FIFO would be copied forever or block: named.
  write_file(root_ / "devmirror/keep", "");
  fs::create_directories(root_ / "devmirror/set");
  ASSERT_EQ(::symlink("/dev/zero", (root_ / "devmirror/set/abc.txt").c_str()), 0);
  EXPECT_EQ(data_error([&] { ensure_file(abc(), data_.string(), (root_ / "devmirror").string()); }),
            "cannot copy set/abc.txt from the data mirror: " + (root_ / "devmirror/set/abc.txt").string() +
                ": it is a device, not a regular file");
  EXPECT_FALSE(has_part_files(data_ / "set"));
}

}  // namespace

}  // namespace data_fetch_test
