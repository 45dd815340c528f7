#pragma once
// An optional interface a dataset implements next to data::Dataset when it feeds a decoder-only
// language model (Batch's decoder-only layout: no source, tgt_out the next token of tgt_in; the
// `text` dataset). A trainer or a sampler finds it with
// dynamic_cast<const data::LanguageModelData*>(dataset) to turn a prompt into ids, sampled ids
// back into text, and ids into the labels of an attention plot's axes.
#include <attnlab/data/dataset.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::data {

class LanguageModelData {
 public:
  virtual ~LanguageModelData();  // defined in libattnlab: one typeinfo for every plugin
  /// The prompt's token ids, as the training text was tokenized. DataError naming the first
  /// character outside the vocabulary and its byte offset in `text` (or where `text` is not UTF-8).
  virtual std::vector<int64_t> encode_prompt(const std::string& text) const = 0;
  /// Ids -> text, every token as it stands in the text ('<pad>' and '<unk>' included as named).
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  /// One label per id for an attention plot's axes: the token, with a newline shown as "\n" (a
  /// backslash and an n) and a space as "␣".
  virtual std::vector<std::string> token_labels(const std::vector<int64_t>& ids) const = 0;
};

}  // namespace attnlab::data
