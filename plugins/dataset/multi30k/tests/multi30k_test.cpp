// The multi30k dataset plugin on the real corpus (needs ATTNLAB_DATA_MIRROR, e.g.
// /work/shared/datasets, and the built plugins via ATTNLAB_PLUGIN_PATH; fails otherwise).
#include <attnlab/config/node.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/data/vocab.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/registry.hpp>

#include "multi30k.hpp"
#include "testing/corpus.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace attnlab;
using datasets::multi30k::Multi30k;
using datasets::multi30k::Multi30kOptions;
using data::Split;
using Tokens = std::vector<std::string>;

std::string mirror() { return testutil::env_or("ATTNLAB_DATA_MIRROR", ""); }
std::string plugin_dir() { return testutil::env_or("ATTNLAB_PLUGIN_PATH", ""); }

#define REQUIRE_DATA()                                                                                  \
  ATTNLAB_REQUIRE(!mirror().empty(), "ATTNLAB_DATA_MIRROR is not set (e.g. /work/shared/datasets)"); \
  ATTNLAB_REQUIRE(!plugin_dir().empty(), "ATTNLAB_PLUGIN_PATH is not set (run through ctest)")

std::vector<int64_t> ids(const torch::Tensor& row) {
  auto r = row.contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

/// Fraction of pad cells in a split's batches (src and tgt_out together).
double padding(const std::vector<data::Batch>& batches) {
  double cells = 0, used = 0;
  for (const auto& b : batches) {
    cells += static_cast<double>(b.src.numel() + b.tgt_out.numel());
    used += static_cast<double>(b.src_valid_lens.sum().item<int64_t>() + b.tgt_valid_lens.sum().item<int64_t>());
  }
  return 1.0 - used / cells;
}

class Multi30kTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (mirror().empty() || plugin_dir().empty()) return;
    registry_ = new plugin::Registry();
    for (const char* so : {"libattnlab_tokenizer_d2l_words.so", "libattnlab_dataset_multi30k.so"})
      registry_->load((fs::path(plugin_dir()) / so).string());
    const auto spm = fs::path(plugin_dir()) / "libattnlab_tokenizer_sentencepiece.so";
    if (fs::exists(spm)) registry_->load(spm.string());
    // The build's shared test data dir when ctest sets it (files fetched once), else a temp dir.
    data_dir_ = new std::string(testutil::env_or("ATTNLAB_TEST_DATA_DIR", testutil::temp_dir("attnlab-m30k")));
    words_ = make(Multi30kOptions{}, "d2l_words").release();
    words_->prepare(*data_dir_);
  }
  static void TearDownTestSuite() {
    delete words_;
    delete data_dir_;
    delete registry_;
  }
  static std::unique_ptr<Multi30k> make(Multi30kOptions o, const std::string& tokenizer_yaml) {
    plugin::BuildContext ctx;
    ctx.registry = registry_;
    const auto node = config::parse_yaml(tokenizer_yaml, "tokenizer.yaml");
    return std::make_unique<Multi30k>(std::move(o), registry_->create<data::Tokenizer>(node, ctx),
                                      registry_->create<data::Tokenizer>(node, ctx));
  }
  static inline plugin::Registry* registry_ = nullptr;
  static inline std::string* data_dir_ = nullptr;
  static inline Multi30k* words_ = nullptr;  // defaults: de -> en, d2l_words, min_freq 2
};

TEST_F(Multi30kTest, LineCountsAndAlignment) {
  REQUIRE_DATA();
  EXPECT_EQ(words_->split_size(Split::Train), 29000);
  EXPECT_EQ(words_->split_size(Split::Val), 1014);
  EXPECT_EQ(words_->split_size(Split::Test), 1000);
  EXPECT_TRUE(words_->has_split(Split::Test));
  EXPECT_EQ(words_->raw_targets(Split::Test).size(), 1000u);
  EXPECT_EQ(words_->raw_sources(Split::Train)[0], "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.");
  EXPECT_EQ(words_->raw_targets(Split::Train)[0], "Two young, White males are outside near many bushes.");
  EXPECT_EQ(words_->raw_sources(Split::Val)[0], "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen");
  EXPECT_EQ(words_->raw_targets(Split::Val)[0], "A group of men are loading cotton onto a truck");
  EXPECT_EQ(words_->raw_sources(Split::Test)[0], "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.");
  EXPECT_EQ(words_->raw_targets(Split::Test)[0], "A man in an orange hat starring at something.");
  EXPECT_EQ(fs::path(words_->path(Split::Test, true)).filename(), "test_2016_flickr.en.gz");
  EXPECT_EQ(data::sha256_file(words_->path(Split::Train, false)), datasets::multi30k::sha256_of("train.de.gz"));

  // The first training pair through the tensors.
  const auto first = words_->batches(Split::Train, false, 0)[0];
  const int64_t s = first.src_valid_lens[0].item<int64_t>();
  const int64_t t = first.tgt_valid_lens[0].item<int64_t>();
  EXPECT_EQ(words_->src_vocab()->decode(ids(first.src[0].narrow(0, 0, s))),
            (Tokens{"zwei", "junge", "weiße", "männer", "sind", "im", "freien", "in", "der", "nähe", "vieler", "büsche",
                    ".", "<eos>"}));
  EXPECT_EQ(words_->tgt_vocab()->decode(ids(first.tgt_in[0].narrow(0, 0, t))),
            (Tokens{"<bos>", "two", "young", ",", "white", "males", "are", "outside", "near", "many", "bushes", "."}));
  EXPECT_EQ(words_->decode_target(ids(first.tgt_out[0])), "two young , white males are outside near many bushes .");
}

TEST_F(Multi30kTest, VocabularyFromTrainingSplitOnly) {
  REQUIRE_DATA();
  std::vector<Tokens> train, all;
  for (const auto& s : words_->raw_targets(Split::Train)) train.push_back(words_->tgt_tokenizer().encode(s));
  all = train;
  for (Split sp : {Split::Val, Split::Test})
    for (const auto& s : words_->raw_targets(sp)) all.push_back(words_->tgt_tokenizer().encode(s));
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  EXPECT_EQ(words_->tgt_vocab()->tokens(), data::Vocab(train, 2, reserved).tokens());
  EXPECT_GT(data::Vocab(all, 2, reserved).size(), words_->tgt_vocab()->size());
  const auto info = words_->info();
  EXPECT_EQ(info.src_vocab_size, words_->src_vocab()->size());
  EXPECT_EQ(info.tgt_vocab_size, words_->tgt_vocab()->size());
  EXPECT_EQ(info.pad_id, (*words_->tgt_vocab())["<pad>"]);
  EXPECT_EQ(info.bos_id, (*words_->tgt_vocab())["<bos>"]);
  EXPECT_EQ(info.eos_id, (*words_->tgt_vocab())["<eos>"]);
  EXPECT_NE(info.bos_id, words_->tgt_vocab()->unk());
  int64_t longest = 0;
  for (Split sp : {Split::Train, Split::Val, Split::Test})
    for (const auto& b : words_->batches(sp, false, 0)) longest = std::max({longest, b.src.size(1), b.tgt_out.size(1)});
  EXPECT_EQ(info.num_steps, longest);
}

TEST_F(Multi30kTest, BucketedBatchShapes) {
  REQUIRE_DATA();
  const auto batches = words_->batches(Split::Train, true, 3);
  ASSERT_EQ(batches.size(), 227u);  // ceil(29000 / 128)
  int64_t rows = 0;
  const int64_t pad = (*words_->tgt_vocab())["<pad>"], bos = (*words_->tgt_vocab())["<bos>"];
  const int64_t eos = (*words_->tgt_vocab())["<eos>"];
  for (const auto& b : batches) {
    const int64_t n = b.size();
    rows += n;
    EXPECT_TRUE(n == 128 || n == 29000 % 128) << n;
    // Padded to the batch's own longest pair.
    EXPECT_EQ(b.src.size(1), b.src_valid_lens.max().item<int64_t>());
    EXPECT_EQ(b.tgt_out.size(1), b.tgt_valid_lens.max().item<int64_t>());
    EXPECT_EQ(b.tgt_in.sizes(), b.tgt_out.sizes());
    EXPECT_TRUE(b.tgt_in.select(1, 0).eq(bos).all().item<bool>());
    EXPECT_TRUE(b.tgt_out.gather(1, (b.tgt_valid_lens - 1).unsqueeze(1)).eq(eos).all().item<bool>());
    EXPECT_EQ(b.tgt_out.ne(pad).sum().item<int64_t>(), b.tgt_valid_lens.sum().item<int64_t>());
    EXPECT_EQ(b.src.dtype(), torch::kLong);
  }
  EXPECT_EQ(rows, 29000);
  // Less padding than unbucketed shuffled batches; seeded.
  auto plain_opts = Multi30kOptions{};
  plain_opts.bucketing = false;
  auto plain = make(plain_opts, "d2l_words");
  plain->prepare(*data_dir_);
  EXPECT_LT(padding(batches), 0.5 * padding(plain->batches(Split::Train, true, 3)));
  const auto again = words_->batches(Split::Train, true, 3);
  EXPECT_TRUE(torch::equal(again[5].src, batches[5].src));
  EXPECT_FALSE(torch::equal(words_->batches(Split::Train, true, 4)[5].tgt_out.sum(), batches[5].tgt_out.sum()));
  // Unshuffled: corpus order, full batches but the last.
  const auto val = words_->batches(Split::Val, false, 0);
  ASSERT_EQ(val.size(), 8u);
  EXPECT_EQ(val.back().size(), 1014 - 7 * 128);
}

TEST_F(Multi30kTest, EncodeDecodeRoundTrip) {
  REQUIRE_DATA();
  const auto sources = words_->raw_sources(Split::Val);
  const auto targets = words_->raw_targets(Split::Val);
  const auto batch = words_->batches(Split::Val, false, 0)[0];
  const std::vector<std::string> some(sources.begin(), sources.begin() + 5);
  const auto enc = words_->encode_sources(some);
  ASSERT_EQ(enc.src.size(0), 5);
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t len = enc.src_valid_lens[i].item<int64_t>();
    EXPECT_EQ(len, batch.src_valid_lens[i].item<int64_t>());
    EXPECT_EQ(ids(enc.src[i].narrow(0, 0, len)), ids(batch.src[i].narrow(0, 0, len)));
    EXPECT_EQ(words_->source_tokens(some[i]).back(), "<eos>");
  }
  // Targets decode to the tokenizer's normal form (d2l_words: lowercased words), except <unk>s.
  const int64_t unk = words_->tgt_vocab()->unk();
  int checked = 0;
  for (int64_t i = 0; i < batch.size(); ++i) {
    if (batch.tgt_out[i].eq(unk).any().item<bool>()) continue;
    EXPECT_EQ(words_->decode_target(ids(batch.tgt_out[i])),
              words_->tgt_tokenizer().decode(words_->tgt_tokenizer().encode(targets[i])));
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST_F(Multi30kTest, SentencePieceRoundTripToRawText) {
  REQUIRE_DATA();
  ATTNLAB_REQUIRE(fs::exists(fs::path(plugin_dir()) / "libattnlab_tokenizer_sentencepiece.so"),
                  "the sentencepiece plugin (libsentencepiece-dev, installed by scripts/setup)");
  Multi30kOptions o;
  o.min_freq = 1;
  auto spm = make(o, "plugin: sentencepiece\nvocab_size: 8000\n");
  spm->prepare(*data_dir_);  // trains (or reuses) one model per language under multi30k/tokenizers/
  const auto targets = spm->raw_targets(Split::Test);
  const auto batches = spm->batches(Split::Test, false, 0);
  int64_t row = 0, same = 0;
  std::string diffs;
  for (const auto& b : batches) {
    for (int64_t i = 0; i < b.size(); ++i, ++row) {
      const std::string decoded = spm->decode_target(ids(b.tgt_out[i]));
      if (decoded == targets[row]) {
        ++same;
      } else {
        diffs += fmt::format("\n  raw:     '{}'\n  decoded: '{}'", targets[row], decoded);
      }
    }
  }
  EXPECT_GE(same, 999) << "of 1000 test targets survive encode -> ids -> decode unchanged:" << diffs;
  // The vocabularies are the models' pieces (8000 less <unk> <s> </s>) plus <pad> <bos> <eos> <unk>.
  EXPECT_EQ(spm->src_vocab()->size(), 8001);
  EXPECT_EQ(spm->tgt_vocab()->size(), 8001);
  // A second dataset with the same options reuses the cached models.
  auto again = make(o, "plugin: sentencepiece\nvocab_size: 8000\n");
  again->prepare(*data_dir_);
  EXPECT_FALSE(again->src_tokenizer_trained());
  EXPECT_FALSE(again->tgt_tokenizer_trained());
  EXPECT_EQ(again->src_vocab()->tokens(), spm->src_vocab()->tokens());
}

TEST_F(Multi30kTest, MaxLenFiltersTrainingPairsOnly) {
  REQUIRE_DATA();
  Multi30kOptions o;
  o.max_len = 10;
  auto short_ds = make(o, "d2l_words");
  short_ds->prepare(*data_dir_);
  const int64_t n = short_ds->split_size(Split::Train);
  EXPECT_GT(n, 1000);
  EXPECT_LT(n, 29000);
  EXPECT_EQ(short_ds->raw_sources(Split::Train).size(), static_cast<size_t>(n));
  for (const auto& b : short_ds->batches(Split::Train, true, 0)) {
    EXPECT_LE(b.src_valid_lens.max().item<int64_t>(), 11);  // 10 tokens + <eos>
    EXPECT_LE(b.tgt_valid_lens.max().item<int64_t>(), 11);
  }
  EXPECT_EQ(short_ds->split_size(Split::Val), 1014);
  EXPECT_EQ(short_ds->split_size(Split::Test), 1000);
  o.max_len = 1;
  auto none = make(o, "d2l_words");
  EXPECT_THROW(none->prepare(*data_dir_), DataError);
}

TEST_F(Multi30kTest, NumTrainKeepsTheFirstTrainingPairs) {
  REQUIRE_DATA();
  Multi30kOptions o;
  o.num_train = 300;
  auto slice = make(o, "d2l_words");
  slice->prepare(*data_dir_);
  EXPECT_EQ(slice->split_size(Split::Train), 300);
  const auto first = slice->raw_sources(Split::Train), all = words_->raw_sources(Split::Train);
  ASSERT_EQ(first.size(), 300u);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), all.begin()));
  int64_t rows = 0;
  for (const auto& b : slice->batches(Split::Train, true, 3)) rows += b.src.size(0);
  EXPECT_EQ(rows, 300);
  EXPECT_EQ(slice->split_size(Split::Val), 1014);  // val and test stay whole
  EXPECT_EQ(slice->split_size(Split::Test), 1000);
  o.num_train = words_->split_size(Split::Train);  // exactly all of them
  auto whole = make(o, "d2l_words");
  whole->prepare(*data_dir_);
  EXPECT_EQ(whole->split_size(Split::Train), words_->split_size(Split::Train));
  // More than there are is a config error naming the option (it used to mean "all", silently).
  o.num_train = 1000000;
  auto too_many = make(o, "d2l_words");
  try {
    too_many->prepare(*data_dir_);
    ADD_FAILURE() << "num_train 1000000 was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format(
                  "multi30k: dataset.num_train 1000000 asks for more training pairs than the corpus holds ({})",
                  words_->split_size(Split::Train))),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Multi30kTest, SharedVocabularyIsOneTokenizerAndOneTableForBothLanguages) {
  REQUIRE_DATA();
  plugin::BuildContext ctx;
  ctx.registry = registry_;
  auto ds = registry_->create<data::Dataset>(
      config::parse_yaml("plugin: multi30k\ntokenizer: d2l_words\nshared_vocab: true\n", "t.yaml"), ctx);
  ds->prepare(*data_dir_);
  const auto& shared = dynamic_cast<const Multi30k&>(*ds);
  EXPECT_EQ(&shared.src_tokenizer(), &shared.tgt_tokenizer());
  // One vocabulary, counted over both languages' training sentences (min_freq 2 over the union).
  std::vector<Tokens> both;
  for (const auto& s : words_->raw_sources(Split::Train)) both.push_back(words_->src_tokenizer().encode(s));
  for (const auto& s : words_->raw_targets(Split::Train)) both.push_back(words_->tgt_tokenizer().encode(s));
  const data::Vocab expected(both, 2, {"<pad>", "<bos>", "<eos>"});
  EXPECT_EQ(ds->src_vocab()->tokens(), expected.tokens());
  EXPECT_EQ(ds->tgt_vocab()->tokens(), expected.tokens());
  EXPECT_GT(expected.size(), words_->src_vocab()->size());
  EXPECT_GT(expected.size(), words_->tgt_vocab()->size());
  for (const char* word : {"hund", "dog", "männer", "men"}) EXPECT_NE((*ds->src_vocab())[word], ds->src_vocab()->unk());
  const auto info = ds->info();
  EXPECT_TRUE(info.shared_vocab);
  EXPECT_FALSE(words_->info().shared_vocab);
  EXPECT_EQ(info.src_vocab_size, info.tgt_vocab_size);
  // The same sentences as without sharing, through the one table: the first pair both ways.
  const auto first = ds->batches(Split::Train, false, 0)[0];
  const int64_t s = first.src_valid_lens[0].item<int64_t>();
  EXPECT_EQ(ds->src_vocab()->decode(ids(first.src[0].narrow(0, 0, s))),
            (Tokens{"zwei", "junge", "weiße", "männer", "sind", "im", "freien", "in", "der", "nähe", "vieler", "büsche",
                    ".", "<eos>"}));
  EXPECT_EQ(ds->decode_target(ids(first.tgt_out[0])), "two young , white males are outside near many bushes .");
  // Constructed directly, shared_vocab takes one tokenizer, not two.
  Multi30kOptions o;
  o.shared_vocab = true;
  EXPECT_THROW(make(o, "d2l_words"), DataError);
}

TEST_F(Multi30kTest, CreatedThroughTheRegistry) {
  REQUIRE_DATA();
  plugin::BuildContext ctx;
  ctx.registry = registry_;
  auto ds = registry_->create<data::Dataset>(
      config::parse_yaml("plugin: multi30k\nsrc: en\ntgt: fr\nbatch_size: 256\ntokenizer: d2l_words\n", "t.yaml"), ctx);
  ds->prepare(*data_dir_);
  EXPECT_EQ(ds->raw_targets(Split::Val).size(), 1014u);
  EXPECT_EQ(ds->raw_sources(Split::Test)[0], "A man in an orange hat starring at something.");
  EXPECT_EQ(ds->batches(Split::Train, true, 0).size(), 114u);  // ceil(29000 / 256)
  EXPECT_THROW(registry_->create<data::Dataset>(config::parse_yaml("plugin: multi30k\nsrc: en\ntgt: en\n", "t"), ctx),
               ConfigError);
  EXPECT_THROW(registry_->create<data::Dataset>(config::parse_yaml("plugin: multi30k\nsrc: es\n", "t"), ctx),
               ConfigError);
}

/// A mirror holding copies of the de/en files, with `edit` applied to one of them.
std::string bad_mirror(const std::string& file, const std::function<void(const fs::path&)>& edit) {
  const fs::path root = testutil::temp_dir("attnlab-m30k-mirror");
  fs::create_directories(root / "multi30k");
  for (const char* stem : {"train", "val", "test_2016_flickr"}) {
    for (const char* lang : {"de", "en"}) {
      const std::string name = fmt::format("{}.{}.gz", stem, lang);
      fs::copy_file(fs::path(mirror()) / "multi30k" / name, root / "multi30k" / name);
      fs::permissions(root / "multi30k" / name, fs::perms::owner_write, fs::perm_options::add);
    }
  }
  edit(root / "multi30k" / file);
  return root.string();
}

/// Runs prepare() with ATTNLAB_DATA_MIRROR pointing at `mirror_dir`; returns the DataError text.
std::string prepare_error(const std::string& mirror_dir, bool verify) {
  const std::string saved = mirror();
  setenv("ATTNLAB_DATA_MIRROR", mirror_dir.c_str(), 1);
  Multi30kOptions o;
  o.verify = verify;
  o.url_bases = {"file:///nonexistent"};  // never fall back to the network
  std::string what;
  try {
    Multi30kTest::make(o, "d2l_words")->prepare(testutil::temp_dir("attnlab-m30k-bad"));
  } catch (const DataError& e) {
    what = e.what();
  }
  setenv("ATTNLAB_DATA_MIRROR", saved.c_str(), 1);
  return what;
}

TEST_F(Multi30kTest, TruncatedOrMisalignedFilesAreDataErrors) {
  REQUIRE_DATA();
  const auto truncated = bad_mirror("train.en.gz", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); });
  const std::string checksum = prepare_error(truncated, true);
  EXPECT_NE(checksum.find("multi30k/train.en.gz"), std::string::npos) << checksum;
  EXPECT_NE(checksum.find("checksum"), std::string::npos) << checksum;
  const std::string gzip = prepare_error(truncated, false);
  EXPECT_NE(gzip.find("train.en.gz"), std::string::npos) << gzip;
  EXPECT_NE(gzip.find("gzip"), std::string::npos) << gzip;

  const auto short_val = bad_mirror("val.en.gz", [](const fs::path& p) {
    const std::string cmd = fmt::format("gzip -dc '{0}' | head -n 1000 | gzip -c > '{0}.tmp' && mv '{0}.tmp' '{0}'",
                                        p.string());
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  });
  const std::string misaligned = prepare_error(short_val, false);
  EXPECT_NE(misaligned.find("val.de.gz has 1014 lines but"), std::string::npos) << misaligned;
  EXPECT_NE(misaligned.find("val.en.gz has 1000"), std::string::npos) << misaligned;
}

TEST_F(Multi30kTest, InvalidUtf8NamesTheFileAndLine) {
  // A byte that cannot start a UTF-8 character on line 17 of val.en.gz: the tokenizer's DataError
  // named neither the file nor the line.
  REQUIRE_DATA();
  size_t at = 0;
  const auto latin = bad_mirror("val.en.gz", [&](const fs::path& p) {
    std::string text = data::read_text_file(p.string());
    for (int line = 1; line < 17; ++line) at = text.find('\n', at) + 1;
    at += 4;
    text.insert(at, "\xff");
    testutil::write_gzip(p, text);
  });
  const std::string msg = prepare_error(latin, false);
  EXPECT_NE(msg.find(fmt::format(
                "/multi30k/val.en.gz:17: invalid UTF-8 at byte {} (byte 5 of the line): byte 0xff cannot start a "
                "character",
                at)),
            std::string::npos)
      << msg;
}

TEST(Multi30kManifest, ChecksumsMatchDatasetsManifest) {
  const std::string src_dir = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
  ATTNLAB_REQUIRE(!src_dir.empty(), "ATTNLAB_SOURCE_DIR is not set (run through ctest)");
  std::ifstream in(fs::path(src_dir) / "datasets/manifest.tsv");
  ASSERT_TRUE(in.good()) << "datasets/manifest.tsv missing";
  int found = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("multi30k/", 0) != 0) continue;
    std::istringstream fields(line);
    std::string relpath, sha, url;
    std::getline(fields, relpath, '\t');
    std::getline(fields, sha, '\t');
    std::getline(fields, url, '\t');
    const std::string name = relpath.substr(std::string("multi30k/").size());
    EXPECT_EQ(sha, datasets::multi30k::sha256_of(name)) << relpath;
    EXPECT_EQ(url, fmt::format("{}/{} {}/{}", datasets::multi30k::kUrlBase, name, datasets::multi30k::kUrlBase2,
                               name));  // the sources in the order tried, space-separated
    ++found;
  }
  EXPECT_EQ(found, 9);
  EXPECT_THROW(datasets::multi30k::sha256_of("train.es.gz"), DataError);
}

}  // namespace
