// The fra_eng dataset: d2l 1.0.3 MTFraEng, pre-tensorised once; batches are index_select slices.
#include "fra_eng.hpp"

#include <attnlab/data/fetch.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <string_view>
#include <utility>

namespace attnlab::datasets::fra_eng {

namespace {

constexpr const char* kPad = "<pad>";
constexpr const char* kBos = "<bos>";
constexpr const char* kEos = "<eos>";

/// Python's open(..., encoding='utf-8') reads with universal newlines: '\r\n' and '\r' -> '\n'.
std::string universal_newlines(std::string text) {
  if (text.find('\r') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

struct Encoded {
  torch::Tensor ids;         // [N, L] int64
  torch::Tensor valid_lens;  // [N] int64, tokens != <pad>
};

/// Sentences (already padded to one length) -> ids with `vocab`.
Encoded encode(const std::vector<Tokens>& sentences, const data::Vocab& vocab) {
  const auto n = static_cast<int64_t>(sentences.size());
  const int64_t len = sentences.empty() ? 0 : static_cast<int64_t>(sentences[0].size());
  auto ids = torch::empty({n, len}, torch::kLong);  // [N, L]
  auto* p = ids.data_ptr<int64_t>();
  for (const auto& s : sentences) {
    for (const auto& t : s) *p++ = vocab[t];
  }
  auto valid = ids.ne(vocab[kPad]).sum(1);  // [N]
  return {ids, valid};
}

/// Tab characters in a line.
size_t tabs_in(std::string_view line) { return static_cast<size_t>(std::count(line.begin(), line.end(), '\t')); }

}  // namespace

void tokenize_pairs(const std::string& text, int64_t max_examples, std::vector<Tokens>& src,
                    std::vector<Tokens>& tgt, std::vector<std::pair<std::string, std::string>>* raw) {
  // for i, line in enumerate(text.split('\n')):
  //     if max_examples and i > max_examples: break
  //     parts = line.split('\t')
  //     if len(parts) == 2: src/tgt.append([t for t in f'{part} <eos>'.split(' ') if t])
  // with 2 replaced by the first line's column count (at least 2): 3 in newer manythings.org files.
  const size_t tabs = std::max<size_t>(1, tabs_in(text.substr(0, text.find('\n'))));
  size_t start = 0;
  for (int64_t i = 0; start <= text.size(); ++i) {
    if (max_examples > 0 && i > max_examples) break;
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    if (tabs_in(line) == tabs) {
      const size_t tab = line.find('\t');
      const std::string_view source = line.substr(0, tab);
      const std::string_view target = line.substr(tab + 1, line.find('\t', tab + 1) - (tab + 1));
      src.push_back(data::split_spaces(std::string(source) + " " + kEos));
      tgt.push_back(data::split_spaces(std::string(target) + " " + kEos));
      if (raw) raw->emplace_back(source, target);
    }
    start = end + 1;
  }
}

std::string check_contents(const std::string& zip_path) {
  std::string text;
  try {
    const std::string member = pairs_member(zip_path);
    text = data::read_zip_member(zip_path, member);
    data::require_utf8(text, member);  // zip_path is a temporary name: the member says where
  } catch (const DataError& e) {
    return e.what();
  }
  text = universal_newlines(std::move(text));
  const std::string first = text.substr(0, text.find('\n'));
  if (first != "Go.\tVa !" && first.rfind("Go.\tVa !\t", 0) != 0) {
    return fmt::format("its fra.txt starts with '{}', expected 'Go.<TAB>Va !'", first.substr(0, 80));
  }
  const size_t tabs = tabs_in(first);
  size_t start = 0;
  for (int64_t i = 0; i < kD2lLines; ++i) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      return fmt::format("its fra.txt has {} lines, d2l's split needs {}", i, kD2lLines);
    }
    if (tabs_in(std::string_view(text).substr(start, end - start)) != tabs) {
      return fmt::format("line {} of its fra.txt does not have the {} tab-separated columns of line 1", i + 1,
                         tabs + 1);
    }
    start = end + 1;
  }
  return "";
}

Tokens pad_or_trim(Tokens tokens, int64_t num_steps) {
  tokens.resize(static_cast<size_t>(num_steps), kPad);  // truncates or pads with '<pad>'
  return tokens;
}

FraEng::FraEng(FraEngOptions options) : opt_(std::move(options)) {
  ATTNLAB_CHECK(opt_.batch_size >= 1 && opt_.num_steps >= 1 && opt_.num_train >= 1 && opt_.num_val >= 0 &&
                    opt_.min_freq >= 0 && opt_.num_examples >= 0,
                DataError,
                "fra_eng: invalid options (batch_size {}, num_steps {}, num_train {}, num_val {}, min_freq {}, "
                "num_examples {}): expected batch_size, num_steps, num_train >= 1 and the rest >= 0",
                opt_.batch_size, opt_.num_steps, opt_.num_train, opt_.num_val, opt_.min_freq, opt_.num_examples);
}

void FraEng::prepare(const std::string& data_dir) {
  const std::string dir = !opt_.data_dir.empty() ? opt_.data_dir : (!data_dir.empty() ? data_dir : "datasets");
  data::RemoteFile file{kRelPath, opt_.urls, opt_.sums};
  if (!opt_.strict) file.content_check = &check_contents;
  prepare_from_text(read_pairs(data::ensure_file(file, dir)));
}

void FraEng::prepare_from_text(const std::string& raw_text) {
  const bool d2l_017 = opt_.num_examples > 0;
  const int64_t max_examples = d2l_017 ? opt_.num_examples : opt_.num_train + opt_.num_val;
  std::vector<Tokens> src, tgt;
  raw_.clear();
  tokenize_pairs(data::d2l_preprocess(universal_newlines(raw_text)), max_examples, src, tgt, &raw_);
  ATTNLAB_CHECK(!src.empty(), DataError, "fra_eng: the corpus has no tab-separated sentence pairs");
  for (auto& s : src) s = pad_or_trim(std::move(s), opt_.num_steps);
  for (auto& t : tgt) {
    t = pad_or_trim(std::move(t), opt_.num_steps);
    t.insert(t.begin(), kBos);  // [num_steps + 1]
  }
  src_vocab_ = data::Vocab(src, opt_.min_freq);
  tgt_vocab_ = data::Vocab(tgt, opt_.min_freq);
  Encoded s = encode(src, src_vocab_);
  Encoded t = encode(tgt, tgt_vocab_);  // [N, num_steps + 1]
  src_ = s.ids;
  src_valid_lens_ = s.valid_lens;
  tgt_in_ = t.ids.slice(1, 0, opt_.num_steps).contiguous();           // [N, num_steps]
  tgt_out_ = t.ids.slice(1, 1, opt_.num_steps + 1).contiguous();      // [N, num_steps]
  tgt_valid_lens_ = tgt_out_.ne(tgt_vocab_[kPad]).sum(1);             // [N]
  const int64_t n = src_.size(0);
  // d2l 1.0's split reads num_train + num_val + 1 pairs: a corpus with fewer would leave the
  // validation split short or empty (an empty split's loss is NaN, which is not divergence).
  ATTNLAB_CHECK(d2l_017 || n >= opt_.num_train + opt_.num_val + 1, ConfigError,
                "fra_eng: dataset.num_train {} and dataset.num_val {} ask for {} sentence pairs (d2l reads one "
                "more), but the corpus holds {}: lower dataset.num_train to at most {}{}",
                opt_.num_train, opt_.num_val, opt_.num_train + opt_.num_val + 1, n,
                std::max<int64_t>(0, n - opt_.num_val - 1),
                n - opt_.num_val - 1 < 1 ? " (and dataset.num_val with it)" : "");
  train_rows_ = d2l_017 ? n : opt_.num_train;
  prepared_ = true;
}

void FraEng::require_prepared(const char* what) const {
  ATTNLAB_CHECK(prepared_, DataError, "fra_eng: {} called before prepare()", what);
}

plugin::DataInfo FraEng::info() const {
  require_prepared("info()");
  plugin::DataInfo d;
  d.src_vocab_size = src_vocab_.size();
  d.tgt_vocab_size = tgt_vocab_.size();
  d.num_steps = opt_.num_steps;
  d.pad_id = tgt_vocab_[kPad];
  d.bos_id = tgt_vocab_[kBos];
  d.eos_id = tgt_vocab_[kEos];
  return d;
}

bool FraEng::has_split(data::Split split) const {
  if (split == data::Split::Train) return true;
  return split == data::Split::Val && opt_.num_examples == 0;
}

int64_t FraEng::split_size(data::Split split) const {
  require_prepared("split_size()");
  if (split == data::Split::Train) return train_rows_;
  if (split == data::Split::Val && has_split(split)) return src_.size(0) - train_rows_;
  return 0;
}

std::vector<data::Batch> FraEng::batches(data::Split split, bool shuffle, uint64_t seed) const {
  require_prepared("batches()");
  ATTNLAB_CHECK(has_split(split), DataError, "fra_eng has no '{}' split{}", data::split_name(split),
                opt_.num_examples > 0 ? " (num_examples > 0 puts every pair in 'train')" : "");
  const int64_t lo = split == data::Split::Train ? 0 : train_rows_;
  const int64_t n = split_size(split);
  torch::Tensor order;  // [n] row indices
  if (shuffle && opt_.shuffle) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    order = torch::randperm(n, gen, torch::kLong) + lo;
  } else {
    order = torch::arange(lo, lo + n, torch::kLong);
  }
  std::vector<data::Batch> out;
  out.reserve(static_cast<size_t>((n + opt_.batch_size - 1) / opt_.batch_size));
  for (int64_t b = 0; b < n; b += opt_.batch_size) {
    const auto idx = order.slice(0, b, std::min(n, b + opt_.batch_size));  // [B]; last one may be short
    data::Batch batch;
    batch.src = src_.index_select(0, idx);
    batch.src_valid_lens = src_valid_lens_.index_select(0, idx);
    batch.tgt_in = tgt_in_.index_select(0, idx);
    batch.tgt_out = tgt_out_.index_select(0, idx);
    batch.tgt_valid_lens = tgt_valid_lens_.index_select(0, idx);
    out.push_back(std::move(batch));
  }
  return out;
}

std::vector<std::string> FraEng::raw_side(data::Split split, bool target) const {
  require_prepared(target ? "raw_targets()" : "raw_sources()");
  std::vector<std::string> out;
  const auto lo = static_cast<size_t>(split == data::Split::Train ? 0 : train_rows_);
  for (size_t i = lo; i < lo + static_cast<size_t>(split_size(split)); ++i) {
    out.push_back(target ? raw_[i].second : raw_[i].first);
  }
  return out;
}

std::vector<std::string> FraEng::source_tokens(const std::string& sentence) const {
  ATTNLAB_CHECK(sentence.find_first_of("\t\n") == std::string::npos, DataError,
                "fra_eng: a source sentence must be one line without tabs, found '{}'", sentence);
  return pad_or_trim(data::split_spaces(data::d2l_preprocess(sentence) + " " + kEos), opt_.num_steps);
}

data::Batch FraEng::encode_sources(const std::vector<std::string>& sentences) const {
  require_prepared("encode_sources()");
  std::vector<Tokens> tokens;
  tokens.reserve(sentences.size());
  for (const auto& s : sentences) tokens.push_back(source_tokens(s));
  Encoded e = encode(tokens, src_vocab_);
  data::Batch batch;
  batch.src = e.ids.reshape({static_cast<int64_t>(sentences.size()), opt_.num_steps});  // [N, num_steps]
  batch.src_valid_lens = e.valid_lens;                                                 // [N]
  return batch;
}

}  // namespace attnlab::datasets::fra_eng
