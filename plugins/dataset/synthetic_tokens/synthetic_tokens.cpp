// Dataset plugin "synthetic_tokens": seeded random token sequences for model summaries, smoke
// tests and decoding tests without a corpus. Words are "t04".."t<V-1>" after the specials
// <bos>=0, <eos>=1, <pad>=2, <unk>=3 (d2l's sorted vocabulary). A source has a random length in
// [min_len, max_len] (default max_len: num_steps - 1) plus <eos>, padded to num_steps; the test
// split's lengths may lie in another range, [test_min_len, test_max_len] (default: the same), for
// length generalisation (train short, test long; num_steps must hold the longest plus <eos>). Its
// target is, per `task`, the same words (copy), reversed (reverse), sorted by id (sort), or
// unrelated random words (random), plus <eos>. Source and target share the one vocabulary
// (info().shared_vocab), so model.share_embeddings applies. The default options draw the same
// data as before these options existed (the lengths are the last draw of each split's stream).
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <optional>
#include <sstream>

namespace {
using namespace attnlab;

constexpr int64_t kSpecials = 4;  // <bos> <eos> <pad> <unk>

struct Split {
  torch::Tensor src, src_lens, tgt_in, tgt_out, tgt_lens;  // [N, T], [N], [N, T], [N, T], [N]
};

struct Lengths {
  int64_t min, max;  // words, both included
};

struct Config {
  int64_t vocab_size = 29;
  int64_t num_steps = 11;
  int64_t batch_size = 3;
  int64_t min_len = 1;
  std::optional<int64_t> max_len;       // null: num_steps - 1
  std::optional<int64_t> test_min_len;  // null: min_len
  std::optional<int64_t> test_max_len;  // null: max_len
  std::string task = "copy";            // copy | reverse | sort | random
  int64_t num_train = 96;
  int64_t num_val = 24;
  int64_t num_test = 24;
  int64_t seed = 0;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("vocab_size", &Config::vocab_size, "tokens including the 4 specials <bos> <eos> <pad> <unk>",
                  {.min = 5})
          .option("num_steps", &Config::num_steps, "padded sequence length T (words + <eos>)", {.min = 2})
          .option("batch_size", &Config::batch_size, "sequences per batch", {.min = 1})
          .option("min_len", &Config::min_len, "fewest words in a train or val sequence", {.min = 1})
          .option("max_len", &Config::max_len, "most words in a train or val sequence (null: num_steps - 1)",
                  {.min = 1})
          .option("test_min_len", &Config::test_min_len, "fewest words in a test sequence (null: min_len)", {.min = 1})
          .option("test_max_len", &Config::test_max_len, "most words in a test sequence (null: max_len)", {.min = 1})
          .choice("task", &Config::task, {"copy", "reverse", "sort", "random"},
                  "target: the source words, reversed, sorted by id, or random")
          .option("num_train", &Config::num_train, "training sequences", {.min = 1})
          .option("num_val", &Config::num_val, "validation sequences (0 = no split)", {.min = 0})
          .option("num_test", &Config::num_test, "test sequences (0 = no split)", {.min = 0})
          .option("seed", &Config::seed, "seed of the generated data (independent of the experiment seed)", {.min = 0});
  return b;
}

/// Per split (train, val, test) the range of words, the options' nulls resolved.
std::array<Lengths, 3> ranges(const Config& c) {
  const Lengths train{c.min_len, c.max_len.value_or(c.num_steps - 1)};
  return {train, train, Lengths{c.test_min_len.value_or(train.min), c.test_max_len.value_or(train.max)}};
}

class SyntheticTokens final : public data::Dataset {
 public:
  SyntheticTokens(const Config& c, const config::Options& o)
      : vocab_size_(c.vocab_size),
        num_steps_(c.num_steps),
        batch_size_(c.batch_size),
        lens_(ranges(c)),
        seed_(static_cast<uint64_t>(c.seed)),
        task_(c.task),
        sizes_{c.num_train, c.num_val, c.num_test} {
    if (vocab_size_ <= kSpecials) {
      binding().fail(o, &Config::vocab_size,
                     fmt::format("needs more than the {} special tokens, found {}", kSpecials, vocab_size_));
    }
    if (c.min_len > num_steps_ - 1) {
      binding().fail(o, &Config::min_len,
                     fmt::format("must leave room for <eos> in num_steps {}, found {}", num_steps_, c.min_len));
    }
    check_range(o, lens_[0], &Config::min_len, &Config::max_len, "min_len", "max_len");
    check_range(o, lens_[2], &Config::test_min_len, &Config::test_max_len, "test_min_len", "test_max_len");
    std::vector<std::string> words;
    for (int64_t i = kSpecials; i < vocab_size_; ++i) words.push_back(fmt::format("t{:02d}", i));
    vocab_ = data::Vocab({words}, 0, {"<pad>", "<bos>", "<eos>"});
  }

  void prepare(const std::string&) override {
    for (size_t s = 0; s < 3; ++s) splits_[s] = make(sizes_[s], seed_ * 3 + s, lens_[s]);
  }

  plugin::DataInfo info() const override {
    plugin::DataInfo d;
    d.src_vocab_size = d.tgt_vocab_size = vocab_size_;
    d.num_steps = num_steps_;
    d.pad_id = vocab_["<pad>"];
    d.bos_id = vocab_["<bos>"];
    d.eos_id = vocab_["<eos>"];
    d.shared_vocab = true;  // one vocabulary for both sides
    return d;
  }

  bool has_split(data::Split split) const override { return sizes_[static_cast<size_t>(split)] > 0; }

  std::vector<data::Batch> batches(data::Split split, bool shuffle, uint64_t seed) const override {
    const auto& d = splits_[static_cast<size_t>(split)];
    const int64_t n = d.src.defined() ? d.src.size(0) : 0;
    auto order = shuffle ? torch::randperm(n, at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong)
                         : torch::arange(n, torch::kLong);  // [N]
    std::vector<data::Batch> out;
    for (int64_t start = 0; start < n; start += batch_size_) {
      auto idx = order.narrow(0, start, std::min(batch_size_, n - start));  // [B]
      out.push_back({d.src.index_select(0, idx), d.src_lens.index_select(0, idx), d.tgt_in.index_select(0, idx),
                     d.tgt_out.index_select(0, idx), d.tgt_lens.index_select(0, idx)});
    }
    return out;
  }

  const data::Vocab* src_vocab() const override { return &vocab_; }
  const data::Vocab* tgt_vocab() const override { return &vocab_; }

  data::Batch encode_sources(const std::vector<std::string>& sentences) const override {
    const int64_t n = static_cast<int64_t>(sentences.size());
    auto src = torch::full({n, num_steps_}, vocab_["<pad>"], torch::kLong);  // [N, T]
    auto lens = torch::zeros({n}, torch::kLong);                             // [N]
    for (int64_t i = 0; i < n; ++i) {
      auto ids = vocab_.encode(source_tokens(sentences[static_cast<size_t>(i)]));
      const auto len = std::min<int64_t>(static_cast<int64_t>(ids.size()), num_steps_);
      for (int64_t t = 0; t < len; ++t) src[i][t] = ids[static_cast<size_t>(t)];
      lens[i] = len;
    }
    data::Batch b;
    b.src = src;
    b.src_valid_lens = lens;
    return b;
  }

  /// Space-separated words, then <eos>.
  std::vector<std::string> source_tokens(const std::string& sentence) const override {
    std::istringstream in(sentence);
    std::vector<std::string> tokens;
    for (std::string w; in >> w;) tokens.push_back(w);
    tokens.push_back("<eos>");
    return tokens;
  }

  std::vector<std::string> raw_sources(data::Split split) const override {
    const auto& d = splits_[static_cast<size_t>(split)];
    return texts(d.src, d.src_lens);
  }
  std::vector<std::string> raw_targets(data::Split split) const override {
    const auto& d = splits_[static_cast<size_t>(split)];
    return texts(d.tgt_out, d.tgt_lens);
  }

 private:
  /// A config error when a split's length range is empty or its longest sequence and <eos> do not
  /// fit in num_steps: at the range's max option when it is given, else at its min option.
  template <class Min>
  void check_range(const config::Options& o, Lengths r, Min Config::*min_field,
                   std::optional<int64_t> Config::*max_field, const char* min_name, const char* max_name) const {
    const auto fail = [&](const std::string& message) {
      if (o.node(binding().name_of(max_field)).is_null()) binding().fail(o, min_field, message);
      binding().fail(o, max_field, message);
    };
    if (r.max < r.min) {
      fail(fmt::format("{} {} exceeds {} {}: the range of lengths is empty", min_name, r.min, max_name, r.max));
    }
    if (r.max > num_steps_ - 1) {
      fail(fmt::format("{} {} words and <eos> need num_steps >= {}, found num_steps {}", max_name, r.max, r.max + 1,
                       num_steps_));
    }
  }

  /// Rows of ids -> words up to (not including) <eos>.
  std::vector<std::string> texts(const torch::Tensor& ids, const torch::Tensor& lens) const {
    std::vector<std::string> out;
    if (!ids.defined()) return out;
    for (int64_t i = 0; i < ids.size(0); ++i) {
      const int64_t len = lens[i].item<int64_t>() - 1;  // without <eos>
      std::vector<int64_t> row(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) row[static_cast<size_t>(t)] = ids[i][t].item<int64_t>();
      out.push_back(decode_target(row));
    }
    return out;
  }

  Split make(int64_t n, uint64_t seed, Lengths range) const {
    Split d;
    if (n == 0) return d;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t pad = vocab_["<pad>"], bos = vocab_["<bos>"], eos = vocab_["<eos>"];
    auto words = torch::randint(kSpecials, vocab_size_, {n, num_steps_}, gen, torch::kLong);  // [N, T]
    auto other = torch::randint(kSpecials, vocab_size_, {n, num_steps_}, gen, torch::kLong);  // [N, T]
    auto lens = torch::randint(range.min, range.max + 1, {n}, gen, torch::kLong);             // [N] words
    d.src = torch::full({n, num_steps_}, pad, torch::kLong);
    d.tgt_out = torch::full({n, num_steps_}, pad, torch::kLong);
    d.tgt_in = torch::full({n, num_steps_}, pad, torch::kLong);
    auto src = d.src.accessor<int64_t, 2>(), out = d.tgt_out.accessor<int64_t, 2>(),
         in = d.tgt_in.accessor<int64_t, 2>();
    auto w = words.accessor<int64_t, 2>(), o = other.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = lens[i].item<int64_t>();
      for (int64_t t = 0; t < len; ++t) {
        src[i][t] = w[i][t];
        out[i][t] = task_ == "copy" || task_ == "sort" ? w[i][t] : task_ == "reverse" ? w[i][len - 1 - t] : o[i][t];
      }
      if (task_ == "sort") std::sort(&out[i][0], &out[i][0] + len);  // a row is contiguous
      src[i][len] = eos;
      out[i][len] = eos;
      in[i][0] = bos;
      for (int64_t t = 1; t <= len; ++t) in[i][t] = out[i][t - 1];
    }
    d.src_lens = lens + 1;  // with <eos>
    d.tgt_lens = lens + 1;
    return d;
  }

  int64_t vocab_size_, num_steps_, batch_size_;
  std::array<Lengths, 3> lens_;  // per split: train, val, test
  uint64_t seed_;
  std::string task_;
  std::array<int64_t, 3> sizes_;
  data::Vocab vocab_;
  std::array<Split, 3> splits_;
};

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<SyntheticTokens>(binding().read(o), o);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "synthetic_tokens",
               "seeded random token sequences (copy, reverse, sort or random targets) for summaries and smoke tests",
               schema, make)
