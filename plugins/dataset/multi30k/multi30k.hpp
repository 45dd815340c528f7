#pragma once
// Multi30K task 1 (Elliott et al., 2016): 29,000 / 1,014 / 1,000 image-caption translations
// (train / val / test_2016_flickr) in English, German and French, raw and line-aligned.
//
// - Files multi30k/{train,val,test_2016_flickr}.<lang>.gz, fetched with data::ensure_file (mirror
//   first, then each of url_bases) and verified against datasets/manifest.tsv's SHA-256 sums.
// - Each language is tokenized by its own instance of the `tokenizer` plugin, trained on that
//   language's training split (a learned model is cached under <data dir>/multi30k/tokenizers/).
// - shared_vocab: one tokenizer trained on both languages' training sentences (source lines, then
//   target lines) and one vocabulary for both sides, so that source and target ids index one table
//   (info().shared_vocab; model.share_embeddings). The two tokenizer arguments are then one object.
// - Vocabularies from the training split only, with reserved <pad> <bos> <eos> plus <unk>: a
//   learned tokenizer's inventory (Tokenizer::vocabulary(), e.g. SentencePiece's pieces), else
//   the encoded training tokens with frequency >= min_freq.
// - Sources are tokens + <eos>; targets <bos> tokens <eos> (tgt_in drops the last, tgt_out the
//   first). Every batch is padded to its own longest sequence: there is no fixed num_steps;
//   info().num_steps is the longest sequence (with <eos>) of any split, a bound for decoding.
// - max_len > 0 drops training pairs with more than max_len tokens on either side (before the
//   specials); val and test are never filtered, so scores are on the standard sets.
// - num_train > 0 keeps the first num_train training pairs (after max_len): quick runs and
//   benchmarks on a slice; the tokenizers are still trained on the whole training split.
// - Training batches (shuffle) are length-bucketed (data::bucket_batches) or, with bucketing off,
//   a seeded random permutation; unshuffled batches keep the corpus order, row i = raw_*()[i].
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/data/vocab.hpp>

#include <torch/types.h>

#include "../common/corpora.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::datasets::multi30k {

// kUrlBase, kUrlBase2, kFolder, file_stem(), sha256_of() and read_lines() are in
// ../common/corpora.hpp (shared with the `text` dataset); keep the sums in sync with
// datasets/manifest.tsv (tests/multi30k_test.cpp here checks).

struct Multi30kOptions {
  std::string src = "de";
  std::string tgt = "en";
  int64_t min_freq = 2;
  int64_t max_len = 0;        // 0 = keep every training pair
  int64_t num_train = 0;      // 0 = every (kept) training pair, else the first num_train
  int64_t batch_size = 128;
  bool bucketing = true;
  int64_t bucket_chunk = 100;  // batches per sorted chunk
  std::string data_dir;        // "" = the data dir given to prepare()
  std::vector<std::string> url_bases = {kUrlBase, kUrlBase2};  // tried in order after the mirror
  bool verify = true;          // check the pinned SHA-256 sums
  bool shared_vocab = false;   // one tokenizer, trained on both languages, and one vocabulary
};

class Multi30k final : public data::Dataset {
 public:
  Multi30k(Multi30kOptions options, std::shared_ptr<data::Tokenizer> src_tokenizer,
           std::shared_ptr<data::Tokenizer> tgt_tokenizer);

  void prepare(const std::string& data_dir) override;
  plugin::DataInfo info() const override;
  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override;
  bool has_split(data::Split) const override { return true; }

  const data::Vocab* src_vocab() const override { return &src_vocab_; }
  const data::Vocab* tgt_vocab() const override { return &tgt_vocab_; }
  /// Tokenize, append <eos>, look up; padded to the longest sentence given. tgt_* undefined.
  data::Batch encode_sources(const std::vector<std::string>& sentences) const override;
  /// The source tokenizer's tokens plus <eos>.
  std::vector<std::string> source_tokens(const std::string& sentence) const override;
  /// Ids up to <eos> (skipping <pad> and <bos>) detokenized by the target tokenizer.
  std::string decode_target(const std::vector<int64_t>& ids) const override;
  std::vector<std::string> raw_sources(data::Split split) const override;
  std::vector<std::string> raw_targets(data::Split split) const override;

  /// Pairs in a split (after the max_len filter for train).
  int64_t split_size(data::Split split) const;
  /// Where the split's source / target file was read from (after prepare()).
  const std::string& path(data::Split split, bool target) const;
  const Multi30kOptions& options() const { return opt_; }
  const data::Tokenizer& src_tokenizer() const { return *src_tok_; }
  const data::Tokenizer& tgt_tokenizer() const { return *tgt_tok_; }
  /// Whether each tokenizer trained during prepare() (false: cached model reused / nothing to learn;
  /// with shared_vocab both report the one tokenizer).
  bool src_tokenizer_trained() const { return src_trained_; }
  bool tgt_tokenizer_trained() const { return tgt_trained_; }

 private:
  struct SplitData {
    std::string src_path, tgt_path;
    std::vector<std::string> raw_src, raw_tgt;
    torch::Tensor src;      // [N, S] source ids + <eos>, <pad> after
    torch::Tensor src_len;  // [N] tokens + 1
    torch::Tensor tgt;      // [N, T + 1] <bos> target ids <eos>, <pad> after
    torch::Tensor tgt_len;  // [N] target tokens + 1 (the non-pad labels of tgt_out)
    std::vector<int64_t> lengths;  // max(src_len, tgt_len) per pair, for bucketing
  };
  using Tokens = std::vector<std::string>;

  void require_prepared(const char* what) const;
  const SplitData& split_data(data::Split split) const;
  SplitData build(std::vector<std::string> raw_src, std::vector<std::string> raw_tgt, std::vector<Tokens> src,
                  std::vector<Tokens> tgt) const;

  Multi30kOptions opt_;
  std::shared_ptr<data::Tokenizer> src_tok_, tgt_tok_;
  bool prepared_ = false, src_trained_ = false, tgt_trained_ = false;
  data::Vocab src_vocab_, tgt_vocab_;
  std::array<SplitData, 3> splits_;  // indexed by Split
};

}  // namespace attnlab::datasets::multi30k
