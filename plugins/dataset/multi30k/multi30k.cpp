// The multi30k dataset: read once, tokenized by the tokenizer plugins, tensorised per split with
// each pair padded to the split's longest; batches are index_select slices narrowed to the batch's
// longest pair.
#include "multi30k.hpp"

#include <attnlab/data/bucketing.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>

#include <torch/types.h>

#include <algorithm>
#include <utility>

namespace attnlab::datasets::multi30k {

namespace {

constexpr const char* kPad = "<pad>";
constexpr const char* kBos = "<bos>";
constexpr const char* kEos = "<eos>";
constexpr data::Split kSplits[] = {data::Split::Train, data::Split::Val, data::Split::Test};

/// Sentences padded to their longest with `pad_id`: ids [N, L] and lengths [N].
std::pair<torch::Tensor, torch::Tensor> pad_ids(const std::vector<std::vector<int64_t>>& rows, int64_t pad_id) {
  const auto n = static_cast<int64_t>(rows.size());
  int64_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, static_cast<int64_t>(r.size()));
  auto ids = torch::full({n, longest}, pad_id, torch::kLong);  // [N, L]
  auto lens = torch::empty({n}, torch::kLong);                // [N]
  auto* p = ids.data_ptr<int64_t>();
  auto* l = lens.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    std::copy(rows[i].begin(), rows[i].end(), p + i * longest);
    l[i] = static_cast<int64_t>(rows[i].size());
  }
  return {ids, lens};
}

}  // namespace

Multi30k::Multi30k(Multi30kOptions options, std::shared_ptr<data::Tokenizer> src_tokenizer,
                   std::shared_ptr<data::Tokenizer> tgt_tokenizer)
    : opt_(std::move(options)), src_tok_(std::move(src_tokenizer)), tgt_tok_(std::move(tgt_tokenizer)) {
  ATTNLAB_CHECK(src_tok_ && tgt_tok_, DataError, "multi30k: a source and a target tokenizer are required");
  ATTNLAB_CHECK(!opt_.shared_vocab || src_tok_ == tgt_tok_, DataError,
                "multi30k: shared_vocab takes one tokenizer for both languages, got two");
  ATTNLAB_CHECK(opt_.src != opt_.tgt, DataError, "multi30k: source and target language are both '{}'", opt_.src);
  ATTNLAB_CHECK(opt_.batch_size >= 1 && opt_.min_freq >= 0 && opt_.max_len >= 0 && opt_.bucket_chunk >= 1, DataError,
                "multi30k: invalid options (batch_size {}, min_freq {}, max_len {}, bucket_chunk {}): expected "
                "batch_size, bucket_chunk >= 1 and min_freq, max_len >= 0",
                opt_.batch_size, opt_.min_freq, opt_.max_len, opt_.bucket_chunk);
}

void Multi30k::prepare(const std::string& data_dir) {
  const std::string dir = !opt_.data_dir.empty() ? opt_.data_dir : (!data_dir.empty() ? data_dir : "datasets");
  std::array<std::vector<std::string>, 3> raw_src, raw_tgt;
  for (data::Split split : kSplits) {
    auto& d = splits_[static_cast<size_t>(split)];
    raw_src[static_cast<size_t>(split)] = read_lines(split, opt_.src, dir, opt_.url_bases, opt_.verify, d.src_path);
    raw_tgt[static_cast<size_t>(split)] = read_lines(split, opt_.tgt, dir, opt_.url_bases, opt_.verify, d.tgt_path);
    const size_t ns = raw_src[static_cast<size_t>(split)].size(), nt = raw_tgt[static_cast<size_t>(split)].size();
    ATTNLAB_CHECK(ns == nt, DataError, "multi30k: {} has {} lines but {} has {}: the languages must be line-aligned",
                  d.src_path, ns, d.tgt_path, nt);
    ATTNLAB_CHECK(ns > 0, DataError, "multi30k: {} is empty", d.src_path);
  }

  const std::string cache = fmt::format("{}/{}/tokenizers", dir, kFolder);
  const auto train = static_cast<size_t>(data::Split::Train);
  if (opt_.shared_vocab) {
    std::vector<std::string> both = raw_src[train];
    both.insert(both.end(), raw_tgt[train].begin(), raw_tgt[train].end());
    src_trained_ = tgt_trained_ = src_tok_->train(both, cache);
  } else {
    src_trained_ = src_tok_->train(raw_src[train], cache);
    tgt_trained_ = tgt_tok_->train(raw_tgt[train], cache);
  }

  std::array<std::vector<Tokens>, 3> src_tokens, tgt_tokens;
  for (data::Split split : kSplits) {
    const auto s = static_cast<size_t>(split);
    for (const auto& line : raw_src[s]) src_tokens[s].push_back(src_tok_->encode(line));
    for (const auto& line : raw_tgt[s]) tgt_tokens[s].push_back(tgt_tok_->encode(line));
  }
  if (opt_.max_len > 0) {  // training pairs only
    const auto max_len = static_cast<size_t>(opt_.max_len);
    size_t kept = 0;
    for (size_t i = 0; i < src_tokens[train].size(); ++i) {
      if (src_tokens[train][i].size() > max_len || tgt_tokens[train][i].size() > max_len) continue;
      src_tokens[train][kept] = std::move(src_tokens[train][i]);
      tgt_tokens[train][kept] = std::move(tgt_tokens[train][i]);
      raw_src[train][kept] = std::move(raw_src[train][i]);
      raw_tgt[train][kept] = std::move(raw_tgt[train][i]);
      ++kept;
    }
    ATTNLAB_CHECK(kept > 0, DataError, "multi30k: max_len {} drops every training pair", opt_.max_len);
    src_tokens[train].resize(kept), tgt_tokens[train].resize(kept);
    raw_src[train].resize(kept), raw_tgt[train].resize(kept);
  }
  ATTNLAB_CHECK(opt_.num_train <= 0 || static_cast<size_t>(opt_.num_train) <= src_tokens[train].size(), ConfigError,
                "multi30k: dataset.num_train {} asks for more training pairs than the corpus holds ({}{}): "
                "lower it, or 0 for all of them",
                opt_.num_train, src_tokens[train].size(), opt_.max_len > 0 ? " within max_len" : "");
  if (opt_.num_train > 0 && static_cast<size_t>(opt_.num_train) < src_tokens[train].size()) {
    const auto n = static_cast<size_t>(opt_.num_train);
    src_tokens[train].resize(n), tgt_tokens[train].resize(n);
    raw_src[train].resize(n), raw_tgt[train].resize(n);
  }
  // A learned tokenizer's own inventory (every piece it can emit), else the training split's
  // tokens with min_freq.
  const auto vocab = [&](const data::Tokenizer& tok, const std::vector<Tokens>& tokens) {
    const std::vector<std::string> reserved{kPad, kBos, kEos};
    const Tokens inventory = tok.vocabulary();
    return inventory.empty() ? data::Vocab(tokens, opt_.min_freq, reserved) : data::Vocab({inventory}, 0, reserved);
  };
  if (opt_.shared_vocab) {
    std::vector<Tokens> both = src_tokens[train];
    both.insert(both.end(), tgt_tokens[train].begin(), tgt_tokens[train].end());
    src_vocab_ = tgt_vocab_ = vocab(*src_tok_, both);
  } else {
    src_vocab_ = vocab(*src_tok_, src_tokens[train]);
    tgt_vocab_ = vocab(*tgt_tok_, tgt_tokens[train]);
  }
  for (data::Split split : kSplits) {
    const auto s = static_cast<size_t>(split);
    SplitData built = build(std::move(raw_src[s]), std::move(raw_tgt[s]), std::move(src_tokens[s]),
                            std::move(tgt_tokens[s]));
    built.src_path = splits_[s].src_path;
    built.tgt_path = splits_[s].tgt_path;
    splits_[s] = std::move(built);
  }
  prepared_ = true;
}

Multi30k::SplitData Multi30k::build(std::vector<std::string> raw_src, std::vector<std::string> raw_tgt,
                                    std::vector<Tokens> src, std::vector<Tokens> tgt) const {
  std::vector<std::vector<int64_t>> src_ids, tgt_ids;
  src_ids.reserve(src.size());
  tgt_ids.reserve(tgt.size());
  for (auto& s : src) {
    s.emplace_back(kEos);
    src_ids.push_back(src_vocab_.encode(s));
  }
  for (auto& t : tgt) {
    t.insert(t.begin(), kBos);
    t.emplace_back(kEos);
    tgt_ids.push_back(tgt_vocab_.encode(t));
  }
  SplitData d;
  d.raw_src = std::move(raw_src);
  d.raw_tgt = std::move(raw_tgt);
  std::tie(d.src, d.src_len) = pad_ids(src_ids, src_vocab_[kPad]);  // [N, S], [N]
  torch::Tensor full_len;
  std::tie(d.tgt, full_len) = pad_ids(tgt_ids, tgt_vocab_[kPad]);   // [N, T + 1], [N]
  d.tgt_len = full_len - 1;                                          // [N] labels incl. <eos>
  d.lengths.resize(src_ids.size());
  const auto* sl = d.src_len.data_ptr<int64_t>();
  const auto* tl = d.tgt_len.data_ptr<int64_t>();
  for (size_t i = 0; i < d.lengths.size(); ++i) d.lengths[i] = std::max(sl[i], tl[i]);
  return d;
}

void Multi30k::require_prepared(const char* what) const {
  ATTNLAB_CHECK(prepared_, DataError, "multi30k: {} called before prepare()", what);
}

const Multi30k::SplitData& Multi30k::split_data(data::Split split) const {
  require_prepared("a split accessor");
  return splits_[static_cast<size_t>(split)];
}

plugin::DataInfo Multi30k::info() const {
  require_prepared("info()");
  plugin::DataInfo d;
  d.src_vocab_size = src_vocab_.size();
  d.tgt_vocab_size = tgt_vocab_.size();
  for (const auto& s : splits_) d.num_steps = std::max({d.num_steps, s.src.size(1), s.tgt.size(1) - 1});
  d.pad_id = tgt_vocab_[kPad];
  d.bos_id = tgt_vocab_[kBos];
  d.eos_id = tgt_vocab_[kEos];
  d.shared_vocab = opt_.shared_vocab;
  return d;
}

int64_t Multi30k::split_size(data::Split split) const { return split_data(split).src.size(0); }

const std::string& Multi30k::path(data::Split split, bool target) const {
  const auto& d = split_data(split);
  return target ? d.tgt_path : d.src_path;
}

std::vector<data::Batch> Multi30k::batches(data::Split split, bool shuffle, uint64_t seed) const {
  require_prepared("batches()");
  const SplitData& d = split_data(split);
  const int64_t n = d.src.size(0);
  std::vector<std::vector<int64_t>> groups;
  if (shuffle && opt_.bucketing) {
    groups = data::bucket_batches(d.lengths, {opt_.batch_size, opt_.bucket_chunk, seed});
  } else if (shuffle) {
    groups = data::random_batches(n, opt_.batch_size, seed);
  } else {
    for (int64_t b = 0; b < n; b += opt_.batch_size) {
      auto& g = groups.emplace_back();
      for (int64_t i = b; i < std::min(n, b + opt_.batch_size); ++i) g.push_back(i);
    }
  }
  std::vector<data::Batch> out;
  out.reserve(groups.size());
  for (const auto& g : groups) {
    const auto idx = torch::tensor(g, torch::kLong);  // [B]
    data::Batch b;
    b.src_valid_lens = d.src_len.index_select(0, idx);                       // [B]
    b.tgt_valid_lens = d.tgt_len.index_select(0, idx);                       // [B]
    const int64_t s = b.src_valid_lens.max().item<int64_t>();
    const int64_t t = b.tgt_valid_lens.max().item<int64_t>();
    b.src = d.src.index_select(0, idx).narrow(1, 0, s).contiguous();        // [B, s]
    const auto tgt = d.tgt.index_select(0, idx);                             // [B, T + 1]
    b.tgt_in = tgt.narrow(1, 0, t).contiguous();                             // [B, t] <bos> y
    b.tgt_out = tgt.narrow(1, 1, t).contiguous();                            // [B, t] y <eos>
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string> Multi30k::source_tokens(const std::string& sentence) const {
  Tokens tokens = src_tok_->encode(sentence);
  tokens.emplace_back(kEos);
  return tokens;
}

data::Batch Multi30k::encode_sources(const std::vector<std::string>& sentences) const {
  require_prepared("encode_sources()");
  std::vector<std::vector<int64_t>> ids;
  ids.reserve(sentences.size());
  for (const auto& s : sentences) ids.push_back(src_vocab_.encode(source_tokens(s)));
  data::Batch batch;
  std::tie(batch.src, batch.src_valid_lens) = pad_ids(ids, src_vocab_[kPad]);  // [N, S], [N]
  return batch;
}

std::string Multi30k::decode_target(const std::vector<int64_t>& ids) const {
  require_prepared("decode_target()");
  const int64_t eos = tgt_vocab_[kEos], pad = tgt_vocab_[kPad], bos = tgt_vocab_[kBos];
  Tokens tokens;
  for (int64_t id : ids) {
    if (id == eos) break;
    if (id == pad || id == bos) continue;
    tokens.push_back(tgt_vocab_.token(id));
  }
  return tgt_tok_->decode(tokens);
}

std::vector<std::string> Multi30k::raw_sources(data::Split split) const { return split_data(split).raw_src; }
std::vector<std::string> Multi30k::raw_targets(data::Split split) const { return split_data(split).raw_tgt; }

}  // namespace attnlab::datasets::multi30k
