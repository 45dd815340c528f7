// The byte_bpe tokenizer: the same token ids as Hugging Face's tokenizers on thousands of texts
// (tokenizers trained and saved by tests/python/byte_bpe_fixture.py, with the venv's transformers and
// tokenizers: GPT-2's layout read from tokenizer.json and from vocab.json + merges.txt, and Llama 3's
// Split + ByteLevel layout), byte-exact round trips, speed, and the files' errors.
#include <attnlab/error.hpp>

#include "byte_bpe.hpp"
#include "byte_map.hpp"
#include "hf_files.hpp"
#include "testing/plugins.hpp"
#include "testing/testing.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::tokenizers::byte_bpe {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testutil::contains;
using testutil::message_of;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// Runs tests/python/byte_bpe_fixture.py into a fresh folder (fails the test when it cannot).
fs::path hf_fixture() {
  const std::string python = testutil::env_or("ATTNLAB_PYTHON", "");
  const std::string source = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
  const std::string mirror = testutil::env_or("ATTNLAB_DATA_MIRROR", "");
  const fs::path dir = testutil::temp_dir("attnlab-byte-bpe");
  if (python.empty() || source.empty() || mirror.empty()) {
    ADD_FAILURE() << "missing what this test needs: ATTNLAB_PYTHON, ATTNLAB_SOURCE_DIR (run through ctest) and "
                     "ATTNLAB_DATA_MIRROR (the fra-eng corpus)";
    return {};
  }
  const std::string cmd = fmt::format("'{}' '{}/tests/python/byte_bpe_fixture.py' '{}' > '{}/log.txt' 2>&1", python,
                                      source, dir.string(), dir.string());
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd << " failed:\n" << read_all(dir / "log.txt");
    return {};
  }
  return dir;
}

struct Case {
  std::string text;
  json ids;  // {"gpt2": [...], "gpt2_files": [...], "split": [...]}
};

std::vector<Case> read_cases(const fs::path& file) {
  std::vector<Case> cases;
  std::ifstream in(file, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    cases.push_back({j.at("text").get<std::string>(), std::move(j)});
  }
  return cases;
}

class ByteBpeTest : public testutil::PluginFileTest {
 protected:
  static std::shared_ptr<data::Tokenizer> make(const std::string& path) {
    return create<data::Tokenizer>("tokenizer", fmt::format("plugin: byte_bpe, path: '{}'", path));
  }
  /// The message of the DataError that making byte_bpe from `path` throws.
  static std::string error_for(const std::string& path) {
    return message_of<DataError>([&] { make(path); });
  }
};

TEST_F(ByteBpeTest, SameIdsAsHuggingFaceOnEveryCase) {
  const fs::path dir = hf_fixture();
  ASSERT_FALSE(dir.empty());
  const auto cases = read_cases(dir / "cases.jsonl");
  ASSERT_GT(cases.size(), 4000u);
  // The files each HF tokenizer was saved as, and how byte_bpe is pointed at them.
  const std::vector<std::pair<std::string, fs::path>> layouts = {
      {"gpt2", dir / "gpt2"},              // the folder: tokenizer.json preferred to vocab.json + merges.txt
      {"gpt2_files", dir / "gpt2_files"},  // vocab.json + merges.txt
      {"split", dir / "split" / "tokenizer.json"},
  };
  size_t compared = 0;
  for (const auto& [name, path] : layouts) {
    SCOPED_TRACE(name);
    const auto tok = make(path.string());
    ASSERT_TRUE(tok->fixed_ids());
    EXPECT_FALSE(tok->train({}, ""));
    const auto vocab = tok->vocabulary();
    EXPECT_EQ(tok->description(), fmt::format("byte_bpe {} ({} tokens)", path.string(), vocab.size()));
    std::unordered_map<std::string, int64_t> id_of;
    for (size_t i = 0; i < vocab.size(); ++i) id_of.emplace(vocab[i], static_cast<int64_t>(i));
    ASSERT_EQ(id_of.size(), vocab.size()) << "a token repeats in the vocabulary";
    const ByteBpe direct(read_hf_files(path.string()), path.string());  // the class itself, for encode_ids
    int failures = 0;
    for (const auto& c : cases) {
      const auto expected = c.ids.at(name).get<std::vector<int64_t>>();
      std::vector<int64_t> ids;
      const auto pieces = tok->encode(c.text);
      for (const auto& p : pieces) ids.push_back(id_of.count(p) ? id_of.at(p) : -1);
      const auto direct_ids = direct.encode_ids(c.text);
      const bool same = ids == expected && std::vector<int64_t>(direct_ids.begin(), direct_ids.end()) == expected;
      const bool round_trip = tok->decode(pieces) == c.text;
      if ((!same || !round_trip) && ++failures <= 10) {
        ADD_FAILURE() << json(c.text).dump() << "\n  ours: " << json(ids).dump()
                      << "\n  HF:   " << json(expected).dump()
                      << (round_trip ? "" : "\n  decode(encode(text)) differs: " + json(tok->decode(pieces)).dump());
      }
      ++compared;
    }
    EXPECT_EQ(failures, 0) << "texts that differ from Hugging Face or do not round-trip";
  }
  EXPECT_EQ(read_hf_files((dir / "gpt2").string()).source, (dir / "gpt2" / "tokenizer.json").string());
  std::cout << "byte_bpe: " << compared << " encodings (" << cases.size() << " texts x " << layouts.size()
            << " tokenizers) identical to Hugging Face's\n";
  RecordProperty("compared", static_cast<int>(compared));
}

TEST_F(ByteBpeTest, EncodesMegabytesInSeconds) {
  const fs::path dir = hf_fixture();
  ASSERT_FALSE(dir.empty());
  std::string text;
  const auto cases = read_cases(dir / "cases.jsonl");
  for (int round = 0; text.size() < (4u << 20); ++round) {
    for (const auto& c : cases) text += c.text + " " + std::to_string(round * 7919 % 100000) + "\n";
  }
  const auto tok = make((dir / "gpt2").string());
  const auto start = std::chrono::steady_clock::now();
  const auto pieces = tok->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "byte_bpe: " << text.size() / 1e6 << " MB -> " << pieces.size() << " tokens in " << seconds << " s\n";
  EXPECT_LT(seconds, 30.0);
  EXPECT_EQ(tok->decode(pieces), text);
}

/// A small GPT-2-style tokenizer.json: the 256 byte characters, the merges "Ġ t", "h e", "Ġt he",
/// and <|endoftext|> added.
json tiny() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_chars()[b]] = b;
  vocab["Ġt"] = 256;
  vocab["he"] = 257;
  vocab["Ġthe"] = 258;
  vocab["<|endoftext|>"] = 259;
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 259},
                                         {"content", "<|endoftext|>"},
                                         {"single_word", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"normalized", false},
                                         {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", json::array({json::array({"Ġ", "t"}), json::array({"h", "e"}), json::array({"Ġt", "he"})})}}}};
}

/// `j` written as <fresh folder>/tokenizer.json; returns the folder.
std::string folder_with(const json& j) {
  const fs::path dir = testutil::temp_dir("attnlab-byte-bpe");
  write_all(dir / "tokenizer.json", j.dump(2));
  return dir.string();
}

TEST_F(ByteBpeTest, MergesAddedTokensAndAnyBytesRoundTrip) {
  const auto tok = make(folder_with(tiny()));
  EXPECT_EQ(tok->encode("the the<|endoftext|>"), (std::vector<std::string>{"t", "he", "Ġthe", "<|endoftext|>"}));
  EXPECT_EQ(tok->encode("a\n\n b"), (std::vector<std::string>{"a", "Ċ", "Ċ", "Ġ", "b"}));  // no merge makes "Ġb"
  EXPECT_EQ(tok->vocabulary().size(), 260u);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {  // any bytes, valid UTF-8 or not
    std::string s(rng() % 40, '\0');
    for (char& ch : s) ch = static_cast<char>(rng() % 4 == 0 ? ' ' : rng());
    ASSERT_EQ(tok->decode(tok->encode(s)), s) << json::binary({s.begin(), s.end()}).dump();
  }
}

TEST_F(ByteBpeTest, MissingPathsNameWhatIsMissing) {
  EXPECT_TRUE(contains(error_for("/nonexistent/gpt2"), "/nonexistent/gpt2: no such"));
  const fs::path empty = testutil::temp_dir("attnlab-byte-bpe");
  EXPECT_TRUE(contains(error_for(empty.string()), "holds neither tokenizer.json nor vocab.json and merges.txt"));
  write_all(empty / "vocab.json", "{\"a\": 0}");
  EXPECT_TRUE(contains(error_for(empty.string()), "(merges.txt is missing)"));
  EXPECT_TRUE(
      contains(error_for((empty / "vocab.json").string()), "give the folder that holds vocab.json and merges.txt"));
  EXPECT_TRUE(
      contains(message_of<ConfigError>([] { create<data::Tokenizer>("tokenizer", "plugin: byte_bpe"); }), "path"));
}

TEST_F(ByteBpeTest, TruncatedJsonNamesTheFileAndPosition) {
  std::string text = tiny().dump(2);
  text.resize(text.size() / 2);
  const fs::path dir = testutil::temp_dir("attnlab-byte-bpe");
  write_all(dir / "tokenizer.json", text);
  const std::string why = error_for(dir.string());
  EXPECT_TRUE(contains(why, (dir / "tokenizer.json").string() + ": not valid JSON: parse error at line ")) << why;
  EXPECT_TRUE(contains(why, "column")) << why;
  write_all(dir / "tokenizer.json", "{\"model\": {\"type\": \"BPE\",, }}");
  EXPECT_TRUE(contains(error_for(dir.string()), "line 1, column 26")) << error_for(dir.string());
}

TEST_F(ByteBpeTest, BadMergesLineNamesFileAndLine) {
  const fs::path dir = testutil::temp_dir("attnlab-byte-bpe");
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_chars()[b]] = b;
  vocab["he"] = 256;
  write_all(dir / "vocab.json", vocab.dump());
  write_all(dir / "merges.txt", "#version: 0.2\nh e\nthree tokens here\n");
  std::string why = error_for(dir.string());
  EXPECT_TRUE(contains(why, (dir / "merges.txt").string() + ":3: 'three tokens here' is not a merge")) << why;
  write_all(dir / "merges.txt", "#version: 0.2\nh e\nx y\n");
  why = error_for(dir.string());
  EXPECT_TRUE(contains(why, "merges.txt:3: the merge 'x y' makes 'xy', which is not in the vocabulary")) << why;
  write_all(dir / "merges.txt", "#version: 0.2\nh e\n");
  vocab["<|endoftext|>"] = 257;
  write_all(dir / "vocab.json", vocab.dump());
  const auto tok = make(dir.string());  // <|endoftext|>: no merge makes it, so it is an added token
  EXPECT_EQ(tok->encode("he<|endoftext|>"), (std::vector<std::string>{"he", "<|endoftext|>"}));
}

TEST_F(ByteBpeTest, OtherTokenizersAreRefusedInOneLine) {
  const auto refused = [](const std::function<void(json&)>& edit, const std::string& what) {
    json j = tiny();
    edit(j);
    const std::string dir = folder_with(j);
    const std::string why = error_for(dir);
    EXPECT_TRUE(contains(why, dir + "/tokenizer.json: " + what)) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
  };
  refused([](json& j) { j["model"]["type"] = "Unigram"; },
          "model type 'Unigram' is not read by attnlab's byte_bpe (it reads byte-level BPE: GPT-2, Llama 3)");
  refused([](json& j) { j["model"]["type"] = "WordPiece"; }, "model type 'WordPiece' is not read");
  refused([](json& j) { j["normalizer"] = {{"type", "NFC"}}; }, "normalizer 'NFC'");
  refused([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "pre-tokenizer 'Whitespace' is not read");
  refused([](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; },
          "pre_tokenizer ByteLevel with add_prefix_space");
  refused([](json& j) { j["model"]["dropout"] = 0.1; }, "BPE dropout 0.1");
  refused([](json& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback: true");
  refused([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, "model.continuing_subword_prefix '##'");
  refused([](json& j) { j["added_tokens"][0]["lstrip"] = true; }, "the added token \"<|endoftext|>\" with lstrip");
}

TEST_F(ByteBpeTest, VocabularyErrorsNameTheFile) {
  json j = tiny();
  j["model"].erase("vocab");
  std::string dir = folder_with(j);
  EXPECT_TRUE(contains(error_for(dir), dir + "/tokenizer.json: has no model.vocab"));
  j = tiny();
  j["model"]["vocab"]["Ġthe"] = 300;  // a gap: no token has id 258
  dir = folder_with(j);
  EXPECT_TRUE(contains(error_for(dir), dir + "/tokenizer.json: ids must run from 0 to 259")) << error_for(dir);
  j = tiny();
  j["model"]["merges"].push_back(json::array({"q", "zz"}));
  dir = folder_with(j);
  EXPECT_TRUE(contains(error_for(dir), "model.merges[3]: the merge 'q zz' names 'zz', which is not in the vocabulary"))
      << error_for(dir);
  j = tiny();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"}, {"pattern", {{"Regex", "(["}}}, {"behavior", "Isolated"}, {"invert", false}},
                    {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  dir = folder_with(j);
  EXPECT_TRUE(contains(error_for(dir), "the pre-tokenizer regex ([ does not compile")) << error_for(dir);
}

}  // namespace
}  // namespace attnlab::tokenizers::byte_bpe
