#pragma once
// Reading a byte-level BPE tokenizer from Hugging Face's files: tokenizer.json (the `tokenizers`
// library's serialization, as transformers' save_pretrained writes it), or GPT-2's original pair
// vocab.json + merges.txt. What is read is what byte_bpe's encoder needs and nothing it cannot
// honour: a tokenizer.json that asks for more (another model type, a normalizer, a pre-tokenizer
// other than ByteLevel or Split + ByteLevel, BPE dropout, a subword prefix, ...) is refused with one
// line naming the file and the setting, never read as something else.
//
//   const BpeFiles f = read_hf_files("models/gpt2");   // a folder, or a tokenizer.json file
//   f.tokens[f.ids.at("Ġthe")] == "Ġthe"
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::tokenizers::byte_bpe {

/// GPT-2's pre-tokenizer regex (ByteLevel with use_regex: true).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// One splitting stage of the pre-tokenizer: matches and the text between them become pieces
/// (tokenizers' SplitDelimiterBehavior::Isolated).
struct SplitStage {
  std::string pattern;   // PCRE2 syntax (Oniguruma's, as tokenizer.json writes it, reads the same)
  bool literal = false;  // Split {pattern: {String: ...}}: the text itself, not a regex
};

/// An added token (tokenizer.json's added_tokens; in vocab.json, an entry no merge makes): split
/// out of the text before pre-tokenization, wherever it occurs, as its single id.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool normalized = false;  // matched in a second pass, on what the first (normalized: false) left
};

/// The merge of the pair (left, right) into `merged`; BpeFiles::merges lists them by rank.
struct Merge {
  int32_t left = 0;
  int32_t right = 0;
  int32_t merged = 0;
};

/// What byte_bpe reads from the files.
struct BpeFiles {
  std::string source;                            // the file(s) read, for messages and description()
  std::vector<std::string> tokens;               // id -> token, for ids 0..V-1 (vocab and added tokens)
  std::unordered_map<std::string, int32_t> ids;  // the model's vocabulary (what merges and bytes reach): token -> id
  std::vector<Merge> merges;                     // by rank (the first merges first)
  std::vector<AddedToken> added;
  std::vector<SplitStage> splits;  // in order; empty: each text between added tokens is one word
  bool ignore_merges = false;      // a word that is a token is that token (Llama 3)
  int32_t unk = -1;                // the unk_token's id, -1 when none (a byte outside the vocab is dropped)
  bool fuse_unk = false;           // consecutive unknown bytes become one unk
};

/// Reads `path`: a folder holding tokenizer.json (preferred) or vocab.json and merges.txt, or a
/// tokenizer.json file (any name). DataError naming the file for anything missing, unreadable,
/// malformed (JSON errors with their line and column, merges.txt errors with file:line) or not a
/// byte-level BPE tokenizer; ids must be 0..V-1 without gaps or repeats.
BpeFiles read_hf_files(const std::string& path);

}  // namespace attnlab::tokenizers::byte_bpe
