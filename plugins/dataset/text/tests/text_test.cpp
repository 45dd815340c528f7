// The text dataset plugin, loaded from its built library as the runner loads it: decoder-only
// batches that are windows of the token stream, each training token a target once per epoch, the
// phase and order a function of the seed, val fixed, the vocabulary and data::LanguageModelData
// (found by dynamic_cast across the plugin boundary), every error at its option or file, and
// fra-eng's English side and Multi30K's German captions read from ATTNLAB_DATA_MIRROR (failing,
// not skipping, without it).
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "testing/corpus.hpp"
#include "testing/plugins.hpp"
#include "testing/testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;
using data::Split;

class TextTest : public testutil::PluginFileTest {
 protected:
  /// The dataset `options` ("source: file, path: ...") configure, not yet prepared.
  static std::shared_ptr<data::Dataset> dataset(const std::string& options) {
    return create<data::Dataset>("dataset", "plugin: text, " + options);
  }
  /// The same, prepared with `data_dir`.
  static std::shared_ptr<data::Dataset> make(const std::string& options, const std::string& data_dir = "") {
    auto d = dataset(options);
    d->prepare(data_dir);
    return d;
  }
  /// `text` written to a fresh file; its path.
  static std::string file_with(const std::string& text) {
    const auto path = fs::path(testutil::temp_dir("attnlab-text")) / "input.txt";
    testutil::write_file(path, text);
    return path.string();
  }
  /// The options reading `path` with `more` options after them.
  static std::string file_options(const std::string& path, const std::string& more) {
    return "source: file, path: '" + path + "'" + (more.empty() ? "" : ", " + more);
  }
  /// The same with a tokenizer plugin: a registry of every built plugin (ATTNLAB_PLUGIN_PATH, set by
  /// ctest), as the runner's, so that the text dataset finds its tokenizer.
  static std::shared_ptr<data::Dataset> make_with_tokenizer(const std::string& options, const std::string& data_dir) {
    static plugin::Registry* registry = [] {
      auto* r = new plugin::Registry();
      r->discover();
      return r;
    }();
    plugin::BuildContext ctx;
    ctx.registry = registry;
    auto d = registry->create<data::Dataset>(
        config::parse_yaml("dataset: {plugin: text, " + options + "}", "test.yaml").at("dataset"), ctx);
    d->prepare(data_dir);
    return d;
  }
  static const data::LanguageModelData& lm(const data::Dataset& d) {
    const auto* l = dynamic_cast<const data::LanguageModelData*>(&d);
    if (l == nullptr) throw std::runtime_error("the text dataset is no data::LanguageModelData");
    return *l;
  }
};

/// A seeded random text over 30 characters (a newline, a space and multi-byte ones among them)
/// whose 9-grams all differ, so a window of block_size 8 (+1) tells where it stands.
std::string random_text(size_t chars, unsigned seed) {
  const std::vector<std::string> alphabet = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
                                             "p", "q", "r", "s", "t", "u", "v", "w", "x", "é", "ü", "ß", "€", " ", "\n"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 3);  // the last two: space, newline
  std::string out;
  for (size_t i = 0; i < chars; ++i) {
    // A space or newline now and then, never first or last (a final newline ends the last line).
    const bool blank = i > 0 && i + 1 < chars && rng() % 7 == 0;
    out += blank ? alphabet[alphabet.size() - 1 - rng() % 2] : alphabet[pick(rng)];
  }
  return out;
}

/// The ids of a text (every character of it is in the dataset's vocabulary).
std::vector<int64_t> ids_of(const data::Dataset& d, const std::string& text) {
  return dynamic_cast<const data::LanguageModelData&>(d).encode_prompt(text);
}

std::vector<int64_t> row(const torch::Tensor& t) {
  auto r = t.contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

/// The first `n` characters of UTF-8 `text`.
std::string first_chars(const std::string& text, size_t n) {
  std::string out;
  for (char32_t c : data::code_points(text)) {
    if (n-- == 0) break;
    out += data::utf8_char(c);
  }
  return out;
}

constexpr int64_t kBlock = 8, kBatch = 5;
constexpr size_t kChars = 2000;  // train: int(2000 * 0.9) = 1800 tokens, val 200

std::string block_options(const std::string& path) {
  return "source: file, path: '" + path + "', block_size: 8, batch_size: 5, val_fraction: 0.1";
}

TEST_F(TextTest, BlocksAreWindowsOfTheStream) {
  const std::string text = random_text(kChars, 1);
  const auto d = make(block_options(file_with(text)));
  const auto stream = ids_of(*d, first_chars(text, 1800));  // the training part
  const auto batches = d->batches(Split::Train, false, 0);
  const int64_t windows = (1800 - 1) / kBlock;  // 224 windows of 9 tokens at stride 8
  ASSERT_EQ(static_cast<int64_t>(batches.size()), (windows + kBatch - 1) / kBatch);
  int64_t k = 0;
  for (const auto& b : batches) {
    EXPECT_FALSE(b.src.defined());  // Batch's decoder-only layout
    EXPECT_FALSE(b.src_valid_lens.defined());
    EXPECT_EQ(b.tgt_in.size(1), kBlock);
    EXPECT_EQ(b.size(), b.tgt_in.size(0));
    EXPECT_TRUE(torch::equal(b.tgt_valid_lens, torch::full({b.size()}, kBlock, torch::kLong)));
    // tgt_out is tgt_in shifted by one.
    EXPECT_TRUE(torch::equal(b.tgt_out.narrow(1, 0, kBlock - 1), b.tgt_in.narrow(1, 1, kBlock - 1)));
    for (int64_t r = 0; r < b.size(); ++r, ++k) {
      const auto at = stream.begin() + k * kBlock;
      EXPECT_EQ(row(b.tgt_in[r]), std::vector<int64_t>(at, at + kBlock)) << "window " << k;
      EXPECT_EQ(row(b.tgt_out[r]), std::vector<int64_t>(at + 1, at + kBlock + 1)) << "window " << k;
    }
  }
  EXPECT_EQ(k, windows);
  EXPECT_EQ(batches.back().size(), windows % kBatch == 0 ? kBatch : windows % kBatch);  // 224 = 44 * 5 + 4
}

TEST_F(TextTest, EveryTrainingTokenIsATargetOncePerEpoch) {
  const std::string text = random_text(kChars, 2);
  const auto d = make(block_options(file_with(text)));
  const auto stream = ids_of(*d, first_chars(text, 1800));
  const auto n = static_cast<int64_t>(stream.size());
  std::map<std::vector<int64_t>, int64_t> start_of;  // each window of 9 tokens -> where it starts
  for (int64_t p = 0; p + kBlock + 1 <= n; ++p) {
    const auto at = stream.begin() + p;
    ASSERT_TRUE(start_of.emplace(std::vector<int64_t>(at, at + kBlock + 1), p).second) << "a repeated 9-gram";
  }
  std::set<int64_t> offsets;
  for (uint64_t seed : {0, 1, 2, 3, 4, 5, 6, 7}) {
    std::vector<int64_t> starts;
    for (const auto& b : d->batches(Split::Train, true, seed)) {
      for (int64_t r = 0; r < b.size(); ++r) {
        auto window = row(b.tgt_in[r]);
        window.push_back(b.tgt_out[r][kBlock - 1].item<int64_t>());
        const auto it = start_of.find(window);
        ASSERT_NE(it, start_of.end()) << "seed " << seed << ": a row that is no window of the stream";
        starts.push_back(it->second);
      }
    }
    EXPECT_FALSE(std::is_sorted(starts.begin(), starts.end())) << "seed " << seed << ": windows not shuffled";
    std::sort(starts.begin(), starts.end());
    const int64_t offset = starts.front();
    EXPECT_LT(offset, kBlock);
    offsets.insert(offset);
    // Windows at the offset and every block_size after it, as many as fit: the targets, positions
    // offset + 1 .. last, each once; what is left out is less than a block at either end.
    for (size_t i = 0; i < starts.size(); ++i) {
      EXPECT_EQ(starts[i], offset + static_cast<int64_t>(i) * kBlock) << "seed " << seed;
    }
    const int64_t last_target = starts.back() + kBlock;
    EXPECT_LT(last_target, n);
    EXPECT_GE(last_target + kBlock, n) << "seed " << seed << ": a whole window left out at the end";
  }
  EXPECT_GE(offsets.size(), 3u) << "the phase offset does not move with the seed";
}

TEST_F(TextTest, PhaseAndOrderDependOnTheSeedOnlyAndValIsFixed) {
  const std::string path = file_with(random_text(kChars, 3));
  const auto a = make(block_options(path)), b = make(block_options(path));
  const auto same = [](const std::vector<data::Batch>& x, const std::vector<data::Batch>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!torch::equal(x[i].tgt_in, y[i].tgt_in) || !torch::equal(x[i].tgt_out, y[i].tgt_out)) return false;
    }
    return true;
  };
  EXPECT_TRUE(same(a->batches(Split::Train, true, 11), b->batches(Split::Train, true, 11)));
  EXPECT_TRUE(same(a->batches(Split::Train, true, 11), a->batches(Split::Train, true, 11)));
  EXPECT_FALSE(same(a->batches(Split::Train, true, 11), a->batches(Split::Train, true, 12)));
  EXPECT_TRUE(same(a->batches(Split::Train, false, 11), b->batches(Split::Train, false, 12)));  // offset 0, in order
  // Val: offset 0, in order, whatever the seed or shuffle say: 200 tokens, 24 windows.
  const auto val = a->batches(Split::Val, true, 5);
  EXPECT_TRUE(same(val, b->batches(Split::Val, false, 6)));
  int64_t rows = 0;
  for (const auto& v : val) rows += v.size();
  EXPECT_EQ(rows, (200 - 1) / kBlock);
  EXPECT_FALSE(a->has_split(Split::Test));
  EXPECT_TRUE(a->has_split(Split::Val));
  EXPECT_THROW(a->batches(Split::Test, false, 0), DataError);
}

TEST_F(TextTest, VocabularyInfoAndDecodeRoundTrip) {
  // 90 training characters without 'Z', then 10 val characters with it; CRLF lines read as LF.
  std::string text;
  for (int i = 0; i < 9; ++i) text += i % 2 == 0 ? "ab cé\r\nbca " : "cab\r\nb aéc ";
  const std::string train_text = [&] {
    std::string t = text;
    for (size_t p; (p = t.find('\r')) != std::string::npos;) t.erase(p, 1);
    return t;
  }();
  ASSERT_EQ(data::code_points(train_text).size(), 90u);
  text += "aZb\nZ c éa";  // 10 more
  const auto d = make(file_options(file_with(text), "block_size: 4, batch_size: 2, val_fraction: 0.1"));
  const auto* vocab = d->tgt_vocab();
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->tokens(), (std::vector<std::string>{"<pad>", "<unk>", "\n", " ", "a", "b", "c", "é"}));
  EXPECT_EQ(d->src_vocab(), nullptr);

  const auto info = d->info();
  EXPECT_EQ(info.tgt_vocab_size, 8);
  EXPECT_EQ(info.src_vocab_size, 0);
  EXPECT_EQ(info.num_steps, 4);
  EXPECT_EQ(info.pad_id, 0);
  EXPECT_EQ(info.bos_id, -1);
  EXPECT_EQ(info.eos_id, -1);
  EXPECT_EQ(info.meta.get<int64_t>("lm.block_size"), 4);
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_train"), 90);
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_val"), 10);
  EXPECT_EQ(info.meta.get<std::string>("lm.source")->rfind("file:", 0), 0u);

  const auto& l = lm(*d);
  const std::string prompt = "ab cé\nbca";
  const auto ids = l.encode_prompt(prompt);
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 5, 3, 6, 7, 2, 5, 6, 4}));
  EXPECT_EQ(l.decode(ids), prompt);
  EXPECT_EQ(d->decode_target(ids), prompt);
  EXPECT_EQ(l.decode({0, 4, 1, 0, 5}), "a\uFFFDb");  // <pad> adds nothing, <unk> is U+FFFD
  EXPECT_EQ(l.token_labels({4, 3, 2, 7, 0, 1}),
            (std::vector<std::string>{"a", "\u2423", "\\n", "é", "<pad>", "<unk>"}));
  EXPECT_THROW(l.decode({8}), DataError);

  // Val's 'Z', unseen in training, is <unk>: "aZb\nZ c éa" -> windows of 5 at stride 4: 2 of them.
  const auto val = d->batches(Split::Val, false, 0);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(row(val[0].tgt_in[0]), (std::vector<int64_t>{4, 1, 5, 2}));
  EXPECT_EQ(row(val[0].tgt_out[1]), (std::vector<int64_t>{3, 6, 3, 7}));
}

TEST_F(TextTest, EncodePromptNamesTheCharacterOutsideTheVocabulary) {
  const auto d = make(block_options(file_with(random_text(kChars, 4))));
  const auto& l = lm(*d);
  const std::string msg = testutil::message_of<DataError>([&] { l.encode_prompt("éaQb"); });
  EXPECT_NE(msg.find("character 'Q' (U+0051) at byte 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("input.txt"), std::string::npos) << msg;
  const std::string bad = testutil::message_of<DataError>([&] { l.encode_prompt("ab\xff"); });
  EXPECT_NE(bad.find("not UTF-8"), std::string::npos) << bad;
  EXPECT_NE(bad.find("byte 2"), std::string::npos) << bad;
  EXPECT_TRUE(l.encode_prompt("").empty());
}

TEST_F(TextTest, FileErrorsNameTheFile) {
  const std::string empty = file_with("");
  std::string msg = testutil::message_of<DataError>([&] { make(file_options(empty, "")); });
  EXPECT_NE(msg.find(empty + " is empty"), std::string::npos) << msg;

  const std::string latin1 = file_with("first line\nJ'ai gagn\xe9 !\n");
  msg = testutil::message_of<DataError>([&] { make(file_options(latin1, "block_size: 4")); });
  EXPECT_NE(msg.find(latin1 + ":2: invalid UTF-8 at byte 20"), std::string::npos) << msg;

  const std::string missing = (fs::path(testutil::temp_dir("attnlab-text")) / "nope.txt").string();
  msg = testutil::message_of<DataError>([&] { make(file_options(missing, "")); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
}

TEST_F(TextTest, TooShortForABlockIsAConfigErrorAtTheOption) {
  // 40 characters: 36 train, 4 val.
  const std::string path = file_with(std::string(40, 'x'));
  std::string msg = testutil::message_of<ConfigError>([&] { make(file_options(path, "block_size: 40")); });
  EXPECT_NE(msg.find("'dataset.block_size'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + " gives 36 training tokens, one block needs 41"), std::string::npos) << msg;

  msg = testutil::message_of<ConfigError>([&] { make(file_options(path, "block_size: 4, max_chars: 4")); });
  EXPECT_NE(msg.find("gives 3 training tokens, one block needs 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(block_size 4 + 1; max_chars 4 cut the text): lower block_size or raise max_chars"),
            std::string::npos)
      << msg;

  msg = testutil::message_of<ConfigError>([&] { make(file_options(path, "block_size: 4, val_fraction: 0.1")); });
  EXPECT_NE(msg.find("test.yaml:1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'dataset.val_fraction'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the last 0.1 of the 40 tokens of " + path +
                     " is 4 tokens, one block needs 5 (block_size 4 + 1): raise val_fraction or lower block_size"),
            std::string::npos)
      << msg;
  make(file_options(path, "block_size: 4, val_fraction: 0.2"));  // 8 val tokens: one block
}

TEST_F(TextTest, OptionErrorsAreConfigErrorsAtTheOption) {
  const auto at = [](const std::string& options, const std::string& option, const std::string& words) {
    const std::string msg = testutil::message_of<ConfigError>([&] { dataset(options); });
    EXPECT_NE(msg.find("'dataset." + option + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(words), std::string::npos) << msg;
  };
  at("source: file", "path", "give its path");
  at("block_size: 8", "path", "give its path");  // source: file is the default
  at("source: fra_eng.en, path: 'input.txt'", "path", "source fra_eng.en reads its own corpus");
  at("path: 'input.txt', val_fraction: 0", "val_fraction", "must be in (0, 0.5]");
  at("path: 'input.txt', val_fraction: 0.6", "val_fraction", "0.5");
  at("source: multi30k.de, val_fraction: 0.2", "val_fraction", "has its own val file");
  at("path: 'input.txt', tokenizer: words", "tokenizer", "words");
  at("path: 'input.txt', block_size: 0", "block_size", "");
  at("source: wiki", "source", "fra_eng.en");
}

/// A seeded text of `lines` lines of 3 to 8 words drawn from 40 made-up words, single spaces
/// between words (which SentencePiece's normalization leaves as they are).
std::string words_text(int lines, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  for (int w = 0; w < 40; ++w) {
    std::string word;
    for (int c = 0, n = 3 + static_cast<int>(rng() % 5); c < n; ++c) word += static_cast<char>('a' + rng() % 12);
    words.push_back(word);
  }
  std::string out;
  for (int l = 0; l < lines; ++l) {
    if (l > 0) out += '\n';
    for (int w = 0, n = 3 + static_cast<int>(rng() % 6); w < n; ++w) {
      if (w > 0) out += ' ';
      out += words[rng() % words.size()];
    }
  }
  return out;
}

TEST_F(TextTest, ASentencePieceTokenizerLearnsFromTheTrainingLinesAndRoundTrips) {
  const std::string text = words_text(400, 7);
  const std::string data_dir = testutil::temp_dir("attnlab-text-spm");
  const auto d = make_with_tokenizer(file_options(file_with(text), "block_size: 16, batch_size: 4, val_fraction: 0.1, "
                                                                  "tokenizer: {plugin: sentencepiece, vocab_size: 80}"),
                                     data_dir);
  // The model is cached under the data dir, keyed by the training lines and the options.
  bool cached = false;
  for (const auto& e : fs::directory_iterator(fs::path(data_dir) / "text/tokenizers")) {
    cached = cached || e.path().extension() == ".model";
  }
  EXPECT_TRUE(cached);
  const auto* vocab = d->tgt_vocab();
  ASSERT_NE(vocab, nullptr);
  const auto tokens = vocab->tokens();
  ASSERT_GT(tokens.size(), 20u);
  EXPECT_EQ(std::vector<std::string>(tokens.begin(), tokens.begin() + 3),
            (std::vector<std::string>{"<pad>", "<unk>", "\n"}));
  EXPECT_LE(d->info().tgt_vocab_size, 83) << "<pad>, <unk>, \\n and at most the model's 80 pieces";
  const auto info = d->info();
  EXPECT_NE(info.meta.get<std::string>("lm.tokenizer")->find("sentencepiece(model_type bpe, vocab_size 80"),
            std::string::npos);

  // Fewer tokens than characters, and the stream decodes back to the text: train, "\n", val.
  const int64_t n_chars = static_cast<int64_t>(data::code_points(text).size());
  const int64_t n_train = *info.meta.get<int64_t>("lm.tokens_train"), n_val = *info.meta.get<int64_t>("lm.tokens_val");
  EXPECT_LT(n_train + n_val, n_chars * 2 / 3) << "BPE pieces are longer than one character";
  const auto& l = lm(*d);
  std::vector<int64_t> stream;
  for (const auto& b : d->batches(Split::Train, false, 0)) {
    for (int64_t r = 0; r < b.tgt_in.size(0); ++r) {
      const auto in = row(b.tgt_in[r]);
      stream.insert(stream.end(), in.begin(), in.end());
    }
  }
  const std::string decoded = l.decode(stream);
  EXPECT_EQ(text.rfind(decoded, 0), 0u) << "the training windows in order are the text's start:\n" << decoded.substr(0, 200);
  EXPECT_GT(decoded.size(), text.size() / 2);

  // A prompt: its lines' pieces with "\n" between; decoded back to itself.
  const std::string first_line = text.substr(0, text.find('\n'));
  const std::string prompt = first_line + "\n" + first_line.substr(0, first_line.find(' '));
  const auto ids = l.encode_prompt(prompt);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1) << "one newline token";
  EXPECT_EQ(l.decode(ids), prompt);
  EXPECT_EQ(l.decode({0, 1}), "\uFFFD");
  const std::string msg = testutil::message_of<DataError>([&] { l.encode_prompt(first_line + " Q"); });
  EXPECT_NE(msg.find("is not in the vocabulary of sentencepiece"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 1 of the prompt"), std::string::npos) << msg;

  // The same corpus and options again: the cached model, the same vocabulary.
  const auto again = make_with_tokenizer(
      file_options(file_with(text), "block_size: 16, batch_size: 4, val_fraction: 0.1, "
                                    "tokenizer: {plugin: sentencepiece, vocab_size: 80}"),
      data_dir);
  EXPECT_EQ(again->tgt_vocab()->tokens(), tokens);
}

TEST_F(TextTest, AWordTokenizerCountsItsVocabularyAndBlocksCountTokens) {
  const auto d = make_with_tokenizer(file_options(file_with("the cat sat\nthe dog sat on the cat\nthe end is near now"),
                                                 "block_size: 2, batch_size: 2, val_fraction: 0.2, tokenizer: d2l_words"),
                                    "");
  const auto* vocab = d->tgt_vocab();
  ASSERT_NE(vocab, nullptr);
  const auto tokens = vocab->tokens();
  ASSERT_GE(tokens.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(tokens.begin(), tokens.begin() + 3),
            (std::vector<std::string>{"<pad>", "<unk>", "\n"}));
  EXPECT_TRUE(std::is_sorted(tokens.begin() + 3, tokens.end())) << "the training text's words, sorted";
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), "cat"), tokens.end());
  EXPECT_EQ(d->info().num_steps, 2);
  const std::string msg = testutil::message_of<ConfigError>([&] {
    make_with_tokenizer(file_options(file_with("one two\nthree four five six"), "block_size: 8, tokenizer: d2l_words"),
                        "");
  });
  EXPECT_NE(msg.find("d2l_words tokens gives"), std::string::npos) << msg;
  EXPECT_NE(msg.find("one block needs 9"), std::string::npos) << msg;
}

std::string mirror() { return testutil::env_or("ATTNLAB_DATA_MIRROR", ""); }

/// A fresh data dir, so the corpus is copied from the mirror (not found in a cache).
#define REQUIRE_MIRROR_WITH(relpath)                                                                  \
  ATTNLAB_REQUIRE(!mirror().empty(), "ATTNLAB_DATA_MIRROR is not set (e.g. /work/shared/datasets)"); \
  ATTNLAB_REQUIRE(fs::exists(fs::path(mirror()) / (relpath)), "the mirror has no " relpath)

TEST_F(TextTest, FraEngEnglishFromTheMirror) {
  REQUIRE_MIRROR_WITH("fra-eng/fra-eng.zip");
  const std::string dir = testutil::temp_dir("attnlab-text-fra");
  const auto d = make("source: fra_eng.en, max_chars: 2000, block_size: 64, batch_size: 4", dir);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "fra-eng/fra-eng.zip"));  // fra_eng's file, in fra_eng's place
  const auto info = d->info();
  EXPECT_EQ(info.meta.get<std::string>("lm.source"), "fra_eng.en");
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_train"), 1800);
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_val"), 200);
  const auto first = d->batches(Split::Train, false, 0).front();
  EXPECT_EQ(lm(*d).decode(row(first.tgt_in[0])).rfind("Go.\nHi.\nRun!\nRun!\nWho?\n", 0), 0u);
  EXPECT_EQ(lm(*d).token_labels({row(first.tgt_in[0])[3]}), std::vector<std::string>{"\\n"});  // "Go.\n"

  const auto fr = make("source: fra_eng.fr, max_chars: 2000, block_size: 64", dir);
  const auto fr_first = fr->batches(Split::Train, false, 0).front();
  EXPECT_EQ(lm(*fr).decode(row(fr_first.tgt_in[0])).rfind("Va !\nSalut !\nCours\u202f!\n", 0), 0u);
}

TEST_F(TextTest, Multi30kGermanTrainAndValFilesFromTheMirror) {
  REQUIRE_MIRROR_WITH("multi30k/val.de.gz");
  const std::string dir = testutil::temp_dir("attnlab-text-m30k");
  const auto d = make("source: multi30k.de, max_chars: 20000, block_size: 32", dir);
  const auto info = d->info();
  EXPECT_EQ(info.meta.get<std::string>("lm.source"), "multi30k.de");
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_train"), 20000);  // each file cut to max_chars
  EXPECT_EQ(info.meta.get<int64_t>("lm.tokens_val"), 20000);
  const auto val = d->batches(Split::Val, false, 0).front();
  EXPECT_EQ(lm(*d).decode(row(val.tgt_in[0])), "Eine Gruppe von Männern lädt Bau");  // val.de.gz's first line
}

}  // namespace
