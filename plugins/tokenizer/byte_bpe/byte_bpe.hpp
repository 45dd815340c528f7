#pragma once
// Tokenizer "byte_bpe": GPT-2's byte-level BPE from Hugging Face's files (hf_files.hpp), encoding
// as Hugging Face's `tokenizers` does:
//   1. added tokens (<|endoftext|>, ...) are split out of the text first, leftmost-longest, those
//      with normalized: false in a first pass and the others in a second, each as its own id;
//   2. each text between them is cut by the pre-tokenizer's regex(es) (PCRE2, UTF + UCP, JIT):
//      the matches and the text between them are the words;
//   3. a word's bytes become GPT-2's byte characters (byte_map.hpp) and are merged pair by pair,
//      lowest merge rank first (the leftmost of equal ranks), as tokenizers' BPE::merge_word; with
//      ignore_merges a word that is itself a token is that token. Words' ids are cached.
// decode maps the characters back to bytes (an added token is its own text): decode(encode(s)) == s
// for any bytes s, valid UTF-8 or not. Nothing to train; the files are read by the constructor.
//
//   ByteBpe tok(read_hf_files("models/gpt2"), "models/gpt2");
//   tok.encode("Hello world")      // {"Hello", "Ġworld"}
//   tok.encode_ids("Hello world")  // {15496, 995}
#include <attnlab/data/tokenizer.hpp>

#include "hf_files.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace attnlab::tokenizers::byte_bpe {

class ByteBpe final : public data::Tokenizer {
 public:
  /// `path`: what the user named, for description(). DataError when a regex does not compile.
  ByteBpe(BpeFiles files, std::string path);
  ~ByteBpe() override;

  std::string name() const override { return "byte_bpe"; }
  bool train(const std::vector<std::string>& corpus, const std::string& cache_dir) override { return false; }
  std::vector<std::string> encode(const std::string& text) const override;
  std::string decode(const std::vector<std::string>& tokens) const override;
  std::vector<std::string> vocabulary() const override { return files_.tokens; }
  /// "byte_bpe <path> (V tokens)".
  std::string description() const override;
  bool fixed_ids() const override { return true; }

  /// The token ids of `text` (indices into vocabulary()).
  std::vector<int32_t> encode_ids(std::string_view text) const;
  /// The text of token ids (DataError for an id outside the vocabulary).
  std::string decode_ids(const std::vector<int32_t>& ids) const;
  const BpeFiles& files() const { return files_; }

 private:
  struct Regex;
  /// Added tokens by their first byte, longest first (one pass of step 1).
  using AddedByFirstByte = std::array<std::vector<const AddedToken*>, 256>;
  /// A part of the text: an added token's id, or text to pre-tokenize (id -1).
  struct Segment {
    std::string_view text;
    int32_t id = -1;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  static void split_added(std::vector<Segment>& segments, const AddedByFirstByte& added);
  /// Appends the ids of one word (step 3), from the cache when it has them.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::vector<int32_t> merge_word(std::string_view word) const;
  void append_token_text(const std::string& token, std::string& out) const;

  BpeFiles files_;
  std::string path_;
  std::vector<std::unique_ptr<Regex>> regexes_;
  AddedByFirstByte added_raw_{};         // normalized: false
  AddedByFirstByte added_normalized_{};  // normalized: true
  std::unordered_set<std::string> added_contents_;
  std::array<int32_t, 256> byte_ids_{};  // each byte character's id, -1 when the vocabulary lacks it
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_of_;  // (left << 32 | right) -> (rank, merged)
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace attnlab::tokenizers::byte_bpe
