// d2l's Vocab (1.0): idx_to_token = sorted(set(['<unk>'] + reserved + [t for t, f in counter
// if f >= min_freq])). std::string's operator< compares bytes as unsigned char, and UTF-8 byte
// order is code-point order, so the ids equal Python's.
#include <attnlab/data/vocab.hpp>
#include <attnlab/error.hpp>

#include <algorithm>
#include <set>
#include <utility>

namespace attnlab::data {

namespace {
constexpr const char* kUnk = "<unk>";
}

Vocab::Vocab(const std::vector<std::vector<std::string>>& sentences, int64_t min_freq,
             const std::vector<std::string>& reserved) {
  std::unordered_map<std::string, int64_t> counter;
  for (const auto& sentence : sentences) {
    for (const auto& token : sentence) ++counter[token];
  }
  std::set<std::string> unique{kUnk};
  unique.insert(reserved.begin(), reserved.end());
  for (const auto& [token, freq] : counter) {
    if (freq >= min_freq) unique.insert(token);
  }
  idx_to_token_.assign(unique.begin(), unique.end());
  token_to_idx_.reserve(idx_to_token_.size());
  for (size_t i = 0; i < idx_to_token_.size(); ++i) token_to_idx_.emplace(idx_to_token_[i], static_cast<int64_t>(i));
}

Vocab Vocab::in_order(std::vector<std::string> tokens, bool with_unk) {
  Vocab v;
  v.idx_to_token_ = std::move(tokens);
  v.token_to_idx_.reserve(v.idx_to_token_.size());
  for (size_t i = 0; i < v.idx_to_token_.size(); ++i) {
    const auto [it, added] = v.token_to_idx_.emplace(v.idx_to_token_[i], static_cast<int64_t>(i));
    ATTNLAB_CHECK(added, DataError, "vocabulary: token '{}' stands at ids {} and {}; tokens must be distinct",
                  v.idx_to_token_[i], it->second, i);
  }
  if (with_unk) v.unk();  // DataError without '<unk>'
  return v;
}

int64_t Vocab::unk() const {
  auto it = token_to_idx_.find(kUnk);
  ATTNLAB_CHECK(it != token_to_idx_.end(), DataError, "vocabulary is empty: it has no '{}' token", kUnk);
  return it->second;
}

int64_t Vocab::operator[](const std::string& token) const {
  auto it = token_to_idx_.find(token);
  if (it != token_to_idx_.end()) return it->second;
  ATTNLAB_CHECK(token_to_idx_.count(kUnk) != 0 || token_to_idx_.empty(), DataError,
                "token '{}' is not in the vocabulary ({} tokens, none of them '{}')", token, size(), kUnk);
  return unk();
}

const std::string& Vocab::token(int64_t id) const {
  ATTNLAB_CHECK(id >= 0 && id < size(), DataError, "token id {} out of range: the vocabulary has {} tokens", id,
                size());
  return idx_to_token_[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back((*this)[t]);
  return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) tokens.push_back(token(id));
  return tokens;
}

}  // namespace attnlab::data
