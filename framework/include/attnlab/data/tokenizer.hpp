#pragma once
// Plugin kind "tokenizer": turns raw sentences into the tokens a dataset builds its vocabulary
// from, and tokens back into text for scoring (detokenization). Some tokenizers learn from the
// training split first (subword models); train() caches what it learns so the next run reuses it.
//
//   auto tok = registry.create<data::Tokenizer>(config::parse_yaml("plugin: sentencepiece"), ctx);
//   tok->train(train_sentences, data_dir + "/multi30k");   // trains, or loads the cached model
//   auto pieces = tok->encode("Ein Hund rennt.");          // {"▁Ein", "▁Hund", "▁rennt", "."}
//   std::string text = tok->decode(pieces);                 // "Ein Hund rennt."
#include <attnlab/plugin/plugin.hpp>

#include <string>
#include <vector>

namespace attnlab::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The plugin's name ("d2l_words", "sentencepiece").
  virtual std::string name() const = 0;
  /// Learn from `corpus` (raw training sentences, one per element) if this tokenizer learns at
  /// all; a learned model is cached under `cache_dir` (created when missing) keyed by the corpus
  /// and the options. Returns true when it trained now, false when it reused a cached model or
  /// has nothing to learn. Must be called before encode/decode (DataError otherwise).
  virtual bool train(const std::vector<std::string>& corpus, const std::string& cache_dir) = 0;
  /// Raw sentence -> tokens (no <bos>/<eos>; the dataset adds those).
  virtual std::vector<std::string> encode(const std::string& text) const = 0;
  /// Tokens -> text, the inverse of encode as far as the tokenizer's normalization allows; what
  /// BLEU is computed on.
  virtual std::string decode(const std::vector<std::string>& tokens) const = 0;
  /// Every token encode() can produce, for a learned model with a fixed inventory (its pieces,
  /// without control symbols); empty for open-ended tokenizers (words), whose vocabulary the
  /// dataset counts from the encoded training split. Valid after train().
  virtual std::vector<std::string> vocabulary() const { return {}; }
  /// One line for logs and results: the name, its options and, for learned models, the model file.
  virtual std::string description() const { return name(); }
  /// True for a pretrained tokenizer whose token ids a model's weights were trained with (GPT-2's
  /// byte-level BPE): vocabulary() lists every token in id order, and a dataset uses exactly those
  /// ids, adding no token of its own (no <pad>, <unk> or "\n"), and hands encode() whole text,
  /// newlines included. false (the default): the dataset builds its own vocabulary around
  /// vocabulary() and encodes line by line.
  virtual bool fixed_ids() const { return false; }
};

}  // namespace attnlab::data

template <>
struct attnlab::plugin::KindOf<attnlab::data::Tokenizer> {
  static constexpr const char* value = "tokenizer";
};
