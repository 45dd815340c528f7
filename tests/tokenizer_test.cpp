// Tokenizer plugins d2l_words and sentencepiece, loaded through the registry from the build's
// plugin folder (ATTNLAB_PLUGIN_PATH, set by ctest; fails otherwise): round trips, training
// cache reuse, errors.
#include <attnlab/config/node.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include "testing/testing.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace attnlab;
using Tokens = std::vector<std::string>;

#define REQUIRE_SPM() \
  ATTNLAB_REQUIRE(has_spm_, "the sentencepiece plugin (libsentencepiece-dev, installed by scripts/setup)")

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testutil::env_or("ATTNLAB_PLUGIN_PATH", "");
    ATTNLAB_REQUIRE(!dir.empty(), "ATTNLAB_PLUGIN_PATH is not set (run through ctest)");
    registry_.load((fs::path(dir) / "libattnlab_tokenizer_d2l_words.so").string());
    const auto spm = fs::path(dir) / "libattnlab_tokenizer_sentencepiece.so";
    has_spm_ = fs::exists(spm);
    if (has_spm_) registry_.load(spm.string());
  }
  std::shared_ptr<data::Tokenizer> make(const std::string& yaml) {
    return registry_.create<data::Tokenizer>(config::parse_yaml(yaml, "test.yaml"), ctx_);
  }
  plugin::Registry registry_;
  plugin::BuildContext ctx_;
  bool has_spm_ = false;
};

/// A caption-like corpus over a fixed word list (with umlauts, ß and accents), seeded.
std::vector<std::string> corpus(unsigned seed, size_t n) {
  static const Tokens words = {
      "Ein", "Mann", "Frau", "Hund", "läuft", "über", "die", "Straße", "mit", "einem", "roten", "Ball", "Kinder",
      "spielen", "im", "Park", "Café", "naïve", "façade", "zwei", "junge", "Männer", "sitzen", "auf", "einer",
      "Bank", "vor", "dem", "Haus", "Ein", "Mädchen", "trägt", "blaue", "Jacke", "und", "weiße", "Schuhe", "Eine",
      "Gruppe", "von", "Leuten", "steht", "draußen", "in", "der", "Nähe", "vieler", "Büsche", "Fahrrad", "fährt",
      "schnell", "durch", "Stadt", "Wasser", "springt", "Strand", "Sonne", "Berg", "Schnee", "Arbeiter", "baut",
      "Gebäude", "Gitarre", "spielt", "Musik", "Bühne", "Kamera", "fotografiert", "Brücke", "Fluss", "Boot"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> len(3, 12), pick(0, words.size() - 1), end(0, 3);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    for (size_t k = len(rng); k > 0; --k) s += (s.empty() ? "" : " ") + words[pick(rng)];
    s += end(rng) == 0 ? "!" : ".";
    out.push_back(s);
  }
  return out;
}

fs::file_time_type mtime(const fs::path& p) { return fs::last_write_time(p); }

std::vector<fs::path> models_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".model") out.push_back(e.path());
  }
  return out;
}

TEST_F(TokenizerTest, D2lWordsRules) {
  auto tok = make("plugin: d2l_words");
  EXPECT_EQ(tok->name(), "d2l_words");
  EXPECT_FALSE(tok->train({"anything"}, testutil::temp_dir("attnlab-d2l-words")));  // nothing to learn
  EXPECT_EQ(tok->encode("Hello, World!"), (Tokens{"hello", ",", "world", "!"}));
  EXPECT_EQ(tok->encode("Zwei junge weiße Männer sind im Freien."),
            (Tokens{"zwei", "junge", "weiße", "männer", "sind", "im", "freien", "."}));
  EXPECT_EQ(tok->encode("  spaced\u00a0out  "), (Tokens{"spaced", "out"}));
  EXPECT_EQ(tok->decode({"a", "dog", "runs", "."}), "a dog runs .");
  EXPECT_EQ(tok->decode({}), "");
  EXPECT_TRUE(tok->vocabulary().empty());  // open-ended: the dataset counts the words
}

TEST_F(TokenizerTest, D2lWordsRoundTripOnPreprocessedText) {
  auto tok = make("d2l_words");
  for (const auto& raw : corpus(1, 200)) {
    const std::string pre = data::d2l_preprocess(raw);  // single spaces in, single spaces out
    EXPECT_EQ(tok->decode(tok->encode(pre)), pre);
    EXPECT_EQ(tok->decode(tok->encode(raw)), pre);
  }
}

TEST_F(TokenizerTest, SentencePieceRoundTripAndCacheReuse) {
  REQUIRE_SPM();
  const auto text = corpus(2, 3000);
  const fs::path cache = fs::path(testutil::temp_dir("attnlab-spm")) / "tokenizers";  // created by train()
  auto first = make("plugin: sentencepiece\nvocab_size: 150\n");
  EXPECT_EQ(first->name(), "sentencepiece");
  EXPECT_TRUE(first->train(text, cache.string()));  // trained now
  auto models = models_in(cache);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].filename().string().rfind("spm-bpe-150-", 0), 0u) << models[0];
  EXPECT_NE(first->description().find(models[0].string()), std::string::npos) << first->description();
  const auto stamp = mtime(models[0]);

  // Round trip on normalized text (single spaces, NFKC-stable characters), seen or unseen.
  const auto unseen = corpus(99, 200);
  for (const auto* set : {&text, &unseen}) {
    for (const auto& s : *set) {
      const Tokens pieces = first->encode(s);
      EXPECT_FALSE(pieces.empty());
      EXPECT_EQ(first->decode(pieces), s);
    }
  }
  EXPECT_GT(first->encode("Straße").size(), 0u);
  // The inventory: every piece encode() emits, without <unk> <s> </s>.
  const Tokens inventory = first->vocabulary();
  EXPECT_EQ(inventory.size(), 147u);
  const std::set<std::string> known(inventory.begin(), inventory.end());
  EXPECT_EQ(known.count("<unk>") + known.count("<s>") + known.count("</s>"), 0u);
  for (const auto& s : unseen) {
    for (const auto& piece : first->encode(s)) EXPECT_EQ(known.count(piece), 1u) << piece;
  }

  // Same corpus and options: the cached model is loaded, not retrained (flag and mtime).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto second = make("plugin: sentencepiece\nvocab_size: 150\n");
  EXPECT_FALSE(second->train(text, cache.string()));
  EXPECT_EQ(models_in(cache).size(), 1u);
  EXPECT_EQ(mtime(models[0]), stamp);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(second->encode(unseen[i]), first->encode(unseen[i]));

  // Another corpus or other options: another model file.
  auto other = make("plugin: sentencepiece\nvocab_size: 150\n");
  EXPECT_TRUE(other->train(corpus(3, 3000), cache.string()));
  auto bigger = make("plugin: sentencepiece\nvocab_size: 160\n");
  EXPECT_TRUE(bigger->train(text, cache.string()));
  EXPECT_EQ(models_in(cache).size(), 3u);

  // An explicit model file is used as is.
  auto given = make("plugin: sentencepiece\nmodel: " + models[0].string() + "\n");
  EXPECT_FALSE(given->train({}, ""));
  EXPECT_EQ(given->encode(unseen[0]), first->encode(unseen[0]));

  // A damaged cached model is replaced by a fresh one.
  std::ofstream(models[0], std::ios::binary | std::ios::trunc) << "not a model";
  auto again = make("plugin: sentencepiece\nvocab_size: 150\n");
  EXPECT_TRUE(again->train(text, cache.string()));
  EXPECT_EQ(again->encode(unseen[0]), first->encode(unseen[0]));
}

TEST_F(TokenizerTest, SentencePieceUnigram) {
  REQUIRE_SPM();
  const auto text = corpus(4, 3000);
  auto tok = make("plugin: sentencepiece\nmodel_type: unigram\nvocab_size: 120\n");
  const std::string cache = testutil::temp_dir("attnlab-spm-uni");
  EXPECT_TRUE(tok->train(text, cache));
  EXPECT_EQ(models_in(cache).at(0).filename().string().rfind("spm-unigram-120-", 0), 0u);
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(tok->decode(tok->encode(text[i])), text[i]);
}

TEST_F(TokenizerTest, SentencePieceErrors) {
  REQUIRE_SPM();
  auto tok = make("plugin: sentencepiece\nvocab_size: 100000\n");
  EXPECT_THROW(tok->encode("too early"), DataError);
  EXPECT_THROW(tok->decode({"▁a"}), DataError);
  // A vocabulary larger than the corpus allows: one config error naming the option and the most
  // that works, without SentencePiece's source file and condition.
  const auto too_high =
      testutil::message_of<ConfigError>([&] { tok->train(corpus(5, 200), testutil::temp_dir("attnlab-spm-err")); });
  EXPECT_TRUE(testutil::contains(too_high, "test.yaml:1:1")) << too_high;
  EXPECT_TRUE(testutil::contains(too_high, "sentencepiece: vocab_size 100000 is more than 200 training sentences can "
                                           "give a bpe model: at most "))
      << too_high;
  EXPECT_FALSE(testutil::contains(too_high, ".cc(")) << too_high;
  EXPECT_FALSE(testutil::contains(too_high, "Internal")) << too_high;
  EXPECT_THROW(tok->train({}, testutil::temp_dir("attnlab-spm-err")), DataError);
  EXPECT_THROW(make("plugin: sentencepiece\nmodel_type: word\n"), ConfigError);
  EXPECT_THROW(make("plugin: sentencepiece\ncharacter_coverage: 1.5\n"), ConfigError);
  auto missing = make("plugin: sentencepiece\nmodel: /nonexistent/x.model\n");
  EXPECT_EQ(testutil::message_of<DataError>([&] { missing->train({}, ""); }),
            "sentencepiece: cannot read the model /nonexistent/x.model: no such file");
  // `model: /dev/zero` was read until std::bad_alloc; a FIFO or a symlink loop is named too.
  auto zero = make("plugin: sentencepiece\nmodel: /dev/zero\n");
  EXPECT_EQ(testutil::message_of<DataError>([&] { zero->train({}, ""); }),
            "sentencepiece: cannot read the model /dev/zero: it is a device, not a regular file");
  const std::string loop = testutil::temp_dir("attnlab-spm-loop") + "/loop.model";
  ASSERT_EQ(::symlink("loop.model", loop.c_str()), 0);
  auto looped = make("plugin: sentencepiece\nmodel: " + loop + "\n");
  EXPECT_EQ(testutil::message_of<DataError>([&] { looped->train({}, ""); }),
            "sentencepiece: cannot read the model " + loop + ": it is a symlink loop");
}

TEST_F(TokenizerTest, RegisteredAsTokenizerKind) {
  const auto& info = registry_.find("tokenizer", "d2l_words");
  EXPECT_EQ(info.kind, "tokenizer");
  EXPECT_THROW(registry_.find("tokenizer", "d2l_wordz"), PluginError);
}

}  // namespace
