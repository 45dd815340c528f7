// byte_bpe's encoder and decoder (byte_bpe.hpp).
#include "byte_bpe.hpp"

#include "byte_map.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <mutex>
#include <queue>
#include <tuple>
#include <utility>

namespace attnlab::tokenizers::byte_bpe {
namespace {

/// Words cached at most (then the cache starts again): a few MB of text has far fewer distinct words.
constexpr size_t kMaxCachedWords = 1 << 20;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

/// The length of the UTF-8 sequence starting with `lead` (1 for a byte that starts none).
size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead < 0xF8) return 4;
  if (lead >= 0xE0) return lead < 0xF0 ? 3 : 1;
  if (lead >= 0xC0) return 2;
  return 1;
}

}  // namespace

/// One compiled pre-tokenizer stage.
struct ByteBpe::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }

  /// Appends the pieces of `s`: each match and each stretch between matches (Isolated).
  void split(std::string_view s, std::vector<std::string_view>& out) const {
    thread_local std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create(1, nullptr),
                                                                                   pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t start = 0, last = 0;
    while (start < s.size()) {
      int rc = pcre2_match(code, subject, s.size(), start, 0, md.get(), nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, subject, s.size(), start, PCRE2_NO_JIT, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(rc, why, sizeof why);
        throw DataError(fmt::format("byte_bpe: the pre-tokenizer regex failed on a text of {} bytes: {}", s.size(),
                                    reinterpret_cast<const char*>(why)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const size_t b = ov[0], e = ov[1];
      if (e == b) {  // an empty match splits nothing: move on by a character
        start = b + utf8_length(static_cast<unsigned char>(s[b]));
        continue;
      }
      if (b > last) out.push_back(s.substr(last, b - last));
      out.push_back(s.substr(b, e - b));
      last = start = e;
    }
    if (last < s.size()) out.push_back(s.substr(last));
  }
};

ByteBpe::ByteBpe(BpeFiles files, std::string path) : files_(std::move(files)), path_(std::move(path)) {
  for (const auto& stage : files_.splits) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (stage.literal ? PCRE2_LITERAL : 0);
    auto re = std::make_unique<Regex>();
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(stage.pattern.data()), stage.pattern.size(), options, &error,
                             &offset, nullptr);
    if (re->code == nullptr) {
      PCRE2_UCHAR why[256];
      pcre2_get_error_message(error, why, sizeof why);
      throw DataError(fmt::format("{}: the pre-tokenizer regex {} does not compile (PCRE2, at offset {}): {}",
                                  files_.source, stage.pattern, offset, reinterpret_cast<const char*>(why)));
    }
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // without JIT (not built in), pcre2_match interprets
    regexes_.push_back(std::move(re));
  }
  for (const auto& a : files_.added) {
    (a.normalized ? added_normalized_ : added_raw_)[static_cast<unsigned char>(a.content[0])].push_back(&a);
    added_contents_.insert(a.content);
  }
  for (auto* by_byte : {&added_raw_, &added_normalized_}) {
    for (auto& list : *by_byte) {
      std::stable_sort(list.begin(), list.end(),
                       [](const AddedToken* x, const AddedToken* y) { return x->content.size() > y->content.size(); });
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = files_.ids.find(byte_chars()[b]);
    byte_ids_[b] = it == files_.ids.end() ? -1 : it->second;
  }
  for (size_t rank = 0; rank < files_.merges.size(); ++rank) {
    const Merge& m = files_.merges[rank];
    // A pair merged twice keeps its last rank, as tokenizers' merge map (collected in order).
    merge_of_.insert_or_assign(pair_key(m.left, m.right), std::pair{static_cast<int32_t>(rank), m.merged});
  }
}

ByteBpe::~ByteBpe() = default;

std::string ByteBpe::description() const { return fmt::format("byte_bpe {} ({} tokens)", path_, files_.tokens.size()); }

void ByteBpe::split_added(std::vector<Segment>& segments, const AddedByFirstByte& added) {
  std::vector<Segment> out;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      out.push_back(seg);
      continue;
    }
    const std::string_view s = seg.text;
    size_t last = 0;
    for (size_t i = 0; i < s.size();) {
      const AddedToken* found = nullptr;
      for (const AddedToken* a : added[static_cast<unsigned char>(s[i])]) {
        if (s.substr(i).starts_with(a->content)) {
          found = a;  // the longest, as they are sorted
          break;
        }
      }
      if (found == nullptr) {
        ++i;
        continue;
      }
      if (i > last) out.push_back({s.substr(last, i - last), -1});
      out.push_back({s.substr(i, found->content.size()), found->id});
      i += found->content.size();
      last = i;
    }
    if (last < s.size()) out.push_back({s.substr(last), -1});
  }
  segments = std::move(out);
}

std::vector<int32_t> ByteBpe::encode_ids(std::string_view text) const {
  std::vector<Segment> segments{{text, -1}};
  if (!files_.added.empty()) {
    split_added(segments, added_raw_);
    split_added(segments, added_normalized_);
  }
  std::vector<int32_t> ids;
  std::vector<std::string_view> words, next;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    words.assign(1, seg.text);
    for (const auto& re : regexes_) {
      next.clear();
      for (const auto w : words) re->split(w, next);
      words.swap(next);
    }
    for (const auto w : words) encode_word(w, ids);
  }
  return ids;
}

void ByteBpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  {
    std::shared_lock lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = merge_word(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::unique_lock lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedWords) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

std::vector<int32_t> ByteBpe::merge_word(std::string_view word) const {
  if (files_.ignore_merges) {
    std::string chars;
    for (const char c : word) chars += byte_chars()[static_cast<unsigned char>(c)];
    if (const auto it = files_.ids.find(chars); it != files_.ids.end()) return {it->second};
  }
  // The word's symbols, linked as tokenizers' Word: a byte outside the vocabulary is the unk token
  // (consecutive ones fused with fuse_unk), or dropped when there is none.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool gone = false;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (const char c : word) {
    int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) {
      if (files_.unk < 0) continue;
      if (files_.fuse_unk && !sym.empty() && sym.back().id == files_.unk) continue;
      id = files_.unk;
    }
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1});
  }
  if (sym.empty()) return {};
  sym.back().next = -1;
  // (rank, position, merged id), the lowest rank first and the leftmost of equal ranks.
  using Candidate = std::tuple<int32_t, int32_t, int32_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t pos) {
    const auto it = merge_of_.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merge_of_.end()) queue.emplace(it->second.first, pos, it->second.second);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const auto [rank, pos, merged] = queue.top();
    queue.pop();
    Symbol& left = sym[pos];
    if (left.gone || left.next < 0) continue;
    const auto it = merge_of_.find(pair_key(left.id, sym[left.next].id));
    if (it == merge_of_.end() || it->second.second != merged) continue;  // the pair has changed since
    Symbol& right = sym[left.next];
    left.id = merged;
    right.gone = true;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = pos;
    if (left.prev >= 0) consider(left.prev);
    if (left.next >= 0) consider(pos);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
  return ids;
}

std::vector<std::string> ByteBpe::encode(const std::string& text) const {
  std::vector<std::string> tokens;
  for (const int32_t id : encode_ids(text)) tokens.push_back(files_.tokens[id]);
  return tokens;
}

void ByteBpe::append_token_text(const std::string& token, std::string& out) const {
  if (added_contents_.contains(token)) {
    out += token;
    return;
  }
  const auto& bytes = code_point_bytes();
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<unsigned char>(token[i]);
    const size_t n = std::min(utf8_length(lead), token.size() - i);
    char32_t cp = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    const auto it = bytes.find(cp);
    if (it != bytes.end()) {
      out += static_cast<char>(it->second);
    } else {
      out.append(token, i, n);  // not a byte character: the text as it is (as tokenizers' ByteLevel decoder)
    }
    i += n;
  }
}

std::string ByteBpe::decode(const std::vector<std::string>& tokens) const {
  std::string out;
  for (const auto& t : tokens) append_token_text(t, out);
  return out;
}

std::string ByteBpe::decode_ids(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    ATTNLAB_CHECK(id >= 0 && static_cast<size_t>(id) < files_.tokens.size(), DataError,
                  "byte_bpe: token id {} is outside the vocabulary of {} ({} tokens)", id, files_.source,
                  files_.tokens.size());
    append_token_text(files_.tokens[id], out);
  }
  return out;
}

}  // namespace attnlab::tokenizers::byte_bpe
