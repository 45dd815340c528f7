#pragma once
// English–French pairs (manythings.org/anki fra.txt) with d2l 1.0.3 MTFraEng semantics exactly:
// _preprocess, _tokenize (including its off-by-one: max_examples + 1 lines are read), pad/trim to
// num_steps, '<bos>' prepended to targets, d2l Vocab(min_freq) over the padded sentences.
//
// Split modes:
//   num_examples == 0 (d2l 1.0): max_examples = num_train + num_val; train = the first
//     num_train pairs, val = all the rest (num_val + 1 by default: 129, as in d2l).
//   num_examples > 0 (d2l 0.17 load_data_nmt): max_examples = num_examples, every pair
//     (num_examples + 1, tokenize_nmt's same off-by-one) is training data; no val split.
//   Both modes share the same preprocessing and array building (d2l 1.0's).
//
// The class lives in a named namespace (not an anonymous one) so tests/fra_eng_test.cpp (here) can
// instantiate it directly; plugin.cpp exports it to the registry.
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/vocab.hpp>

#include <torch/types.h>

#include "../common/corpora.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::datasets::fra_eng {

// kRelPath, the URLs, the sums and kMember are in ../common/corpora.hpp (shared with the `text`
// dataset); keep them in sync with datasets/manifest.tsv (tests/fra_eng_test.cpp here checks).
/// Lines d2l's default split reads (num_train 512 + num_val 128, plus its off-by-one).
inline constexpr int64_t kD2lLines = 641;

struct FraEngOptions {
  int64_t batch_size = 128;
  int64_t num_steps = 9;
  int64_t num_train = 512;
  int64_t num_val = 128;
  int64_t min_freq = 2;
  int64_t num_examples = 0;  // 0: d2l 1.0 train/val split; > 0: d2l 0.17, all for training
  std::string data_dir;      // "" = the data dir given to prepare()
  std::vector<std::string> urls = {kD2lUrl, kManythingsUrl};  // tried in order after the mirror
  std::vector<std::string> sums = {kD2lSha1, kSha256};        // accepted SHA-1 / SHA-256 sums
  bool strict = false;  // true: refuse a zip no sum matches; false: accept it after check_contents
  bool shuffle = true;       // false: training batches stay in corpus order
};

using Tokens = std::vector<std::string>;

/// d2l's MTFraEng._tokenize on preprocessed text: up to max_examples + 1 lines (0 = all), pairs
/// with exactly one tab, each side split on spaces with '<eos>' appended. A newer manythings.org
/// file has a third (attribution) column: the first line's column count is the file's, lines with
/// that many columns are pairs of their first two (for a 2-column file: d2l's rule exactly). With
/// `raw` given, each pair's two sides as text (preprocessed, no '<eos>') are appended there too.
void tokenize_pairs(const std::string& text, int64_t max_examples, std::vector<Tokens>& src,
                    std::vector<Tokens>& tgt, std::vector<std::pair<std::string, std::string>>* raw = nullptr);

/// Why the zip at `zip_path` is not a usable fra-eng corpus, or "" when it is: a fra.txt member,
/// valid UTF-8, first line "Go.<TAB>Va !" (plus any further columns), and at least kD2lLines lines
/// all with that line's tab-separated columns. For a download that matches no pinned checksum.
std::string check_contents(const std::string& zip_path);

/// d2l's pad_or_trim: first num_steps tokens, or padded with '<pad>' to num_steps.
Tokens pad_or_trim(Tokens tokens, int64_t num_steps);

class FraEng final : public data::Dataset {
 public:
  explicit FraEng(FraEngOptions options);

  void prepare(const std::string& data_dir) override;
  /// Same as prepare() for text already read from fra.txt (tests, other packagings).
  void prepare_from_text(const std::string& raw_text);

  plugin::DataInfo info() const override;
  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override;
  bool has_split(data::Split split) const override;

  const data::Vocab* src_vocab() const override { return &src_vocab_; }
  const data::Vocab* tgt_vocab() const override { return &tgt_vocab_; }
  /// d2l's build(): preprocess, "<sentence> <eos>", pad/trim, src-vocab ids. tgt_* undefined.
  data::Batch encode_sources(const std::vector<std::string>& sentences) const override;
  /// The padded source tokens (num_steps of them) before the vocabulary lookup.
  std::vector<std::string> source_tokens(const std::string& sentence) const override;
  /// A split's pairs as d2l-preprocessed text ("i'm home ." / "je suis chez moi ."), whole (not
  /// trimmed to num_steps): what `runner eval` translates and scores against.
  std::vector<std::string> raw_sources(data::Split split) const override { return raw_side(split, false); }
  std::vector<std::string> raw_targets(data::Split split) const override { return raw_side(split, true); }

  /// Number of pairs in a split (0 for an absent split).
  int64_t split_size(data::Split split) const;
  const FraEngOptions& options() const { return opt_; }

 private:
  void require_prepared(const char* what) const;
  std::vector<std::string> raw_side(data::Split split, bool target) const;

  FraEngOptions opt_;
  bool prepared_ = false;
  data::Vocab src_vocab_, tgt_vocab_;
  torch::Tensor src_;             // [N, num_steps] ids
  torch::Tensor src_valid_lens_;  // [N] non-pad source tokens
  torch::Tensor tgt_in_;          // [N, num_steps] <bos> + target[:-1]
  torch::Tensor tgt_out_;         // [N, num_steps] target
  torch::Tensor tgt_valid_lens_;  // [N] non-pad tokens of tgt_out
  int64_t train_rows_ = 0;        // rows [0, train_rows_) train, [train_rows_, N) val
  std::vector<std::pair<std::string, std::string>> raw_;  // [N] (source, target) text
};

}  // namespace attnlab::datasets::fra_eng
