#pragma once
// d2l's Vocab: tokens with frequency >= min_freq plus '<unk>' and reserved tokens, sorted
// (byte order of UTF-8 = Python's code-point order), so ids match d2l exactly; or a list of
// tokens in an order of the dataset's own (in_order).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::data {

class Vocab {
 public:
  Vocab() = default;
  Vocab(const std::vector<std::vector<std::string>>& sentences, int64_t min_freq,
        const std::vector<std::string>& reserved = {});
  /// A vocabulary of exactly `tokens`, id = index (a dataset that fixes its own order, such as
  /// '<pad>' first). DataError unless the tokens are distinct and (with_unk) one of them is '<unk>'.
  /// Without '<unk>' (a pretrained tokenizer's ids, which cover every input) looking up a token that
  /// is absent is a DataError naming it.
  static Vocab in_order(std::vector<std::string> tokens, bool with_unk = true);
  int64_t size() const { return static_cast<int64_t>(idx_to_token_.size()); }
  int64_t operator[](const std::string& token) const;  // unk id when absent
  const std::string& token(int64_t id) const;
  int64_t unk() const;
  const std::vector<std::string>& tokens() const { return idx_to_token_; }
  std::vector<int64_t> encode(const std::vector<std::string>& tokens) const;
  std::vector<std::string> decode(const std::vector<int64_t>& ids) const;

 private:
  std::vector<std::string> idx_to_token_;
  std::unordered_map<std::string, int64_t> token_to_idx_;
};

}  // namespace attnlab::data
