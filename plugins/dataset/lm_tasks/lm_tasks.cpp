// Dataset plugin "lm_tasks": synthetic in-context tasks for decoder-only language models, in
// Batch's decoder-only layout (no source; tgt_out the next token of tgt_in, '<pad>' where a label
// is not scored; tgt_valid_lens the count of scored labels of a row). Every row is drawn from the
// data's own seed in prepare(); `fresh: true` draws new training rows for every epoch from (seed,
// the epoch's seed) instead. Tasks (`task`):
//
// - repeated: [<bos>] r r, r of half_len tokens drawn uniformly from the ordinary tokens, the
//   setting in which induction heads form (Elhage et al. 2021, Olsson et al. 2022). Scored: the
//   tokens of the second copy (loss_on: second_half; its first token can only be known from its
//   position), or every label (loss_on: all). With min_half_len, r's length is drawn per row from
//   [min_half_len, half_len] and rows are right-padded: with one length for all rows, the answer
//   always stands half_len - 1 tokens back, and one layer learns that offset (no induction).
// - mqar: multi-query associative recall as Zoology draws it (Arora, Eyuboglu et al. 2023;
//   HazyResearch/zoology, data/associative_recall.py, _mqar): num_kv_pairs keys drawn without
//   replacement from [1, V/2) and values from [V/2, V), interleaved at the start (k v k v ...);
//   then each key queried once, at 2 kv + 2 gap, the gaps drawn without replacement from
//   [0, (L - 2 kv) / 2) with probability proportional to a i^(a - 1) (i = gap + 1, a = power_a);
//   the label at a query is its key's value, no other label is scored. Other positions are token
//   0, or uniform over [0, V) with random_non_queries. Token ids are Zoology's (0 .. V-1), '<pad>'
//   is the extra id V.
// - copy, reverse, sort: x <sep> f(x) <eos>, x of a length drawn from train_len (test_len for the
//   test split, for length generalisation), f the identity, reversal or sorting by id; scored:
//   f(x) and <eos>; rows right-padded with <pad>.
//
// Token names: an ordinary token is named by its id ("17"), the specials by their own names
// ("<sep>"); a prompt (data::LanguageModelData) is space-separated names or ids.
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/data/vocab.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using namespace attnlab;
using data::Split;

enum class Task { Repeated, Mqar, Copy, Reverse, Sort };

const char* task_name(Task t) {
  switch (t) {
    case Task::Repeated:
      return "repeated";
    case Task::Mqar:
      return "mqar";
    case Task::Copy:
      return "copy";
    case Task::Reverse:
      return "reverse";
    case Task::Sort:
      return "sort";
  }
  return "?";
}

bool transduction(Task t) { return t == Task::Copy || t == Task::Reverse || t == Task::Sort; }

constexpr int64_t kMaxLen = 1 << 16;   // most tokens of x in copy, reverse, sort
constexpr int64_t kMqarVocab = 8192;   // Zoology's default vocab_size
constexpr int64_t kDefaultVocab = 32;  // ordinary tokens of the other tasks by default

struct Config {
  Task task = Task::Repeated;
  std::optional<int64_t> vocab_size;  // null: kMqarVocab for mqar, kDefaultVocab otherwise
  int64_t half_len = 32;
  std::optional<int64_t> min_half_len;  // null: half_len (every r as long)
  bool bos = true;
  bool loss_on_all = false;  // loss_on: second_half | all
  int64_t seq_len = 64;
  int64_t num_kv_pairs = 4;
  double power_a = 0.01;
  bool random_non_queries = true;
  config::Node train_len;  // [min, max]
  config::Node test_len;   // [min, max] or null (train_len)
  int64_t num_train = 2048;
  int64_t num_val = 256;
  int64_t num_test = 256;
  int64_t batch_size = 32;
  int64_t seed = 0;
  bool fresh = false;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .choice("task", &Config::task,
                  {{"repeated", Task::Repeated},
                   {"mqar", Task::Mqar},
                   {"copy", Task::Copy},
                   {"reverse", Task::Reverse},
                   {"sort", Task::Sort}},
                  "repeated: [<bos>] r r (induction heads); mqar: Zoology's multi-query associative recall; "
                  "copy, reverse, sort: x <sep> f(x) <eos>")
          .option("vocab_size", &Config::vocab_size,
                  "mqar: Zoology's vocab_size V (ids 0..V-1, <pad> is V; null: 8192); the other tasks: ordinary "
                  "tokens, after the specials (null: 32)",
                  {.min = 1})
          .option("half_len", &Config::half_len, "repeated: tokens of r (a row is [<bos>] r r)",
                  {.min = 1, .max = kMaxLen})
          .option("min_half_len", &Config::min_half_len,
                  "repeated: r's length is drawn per row from [min_half_len, half_len], rows right-padded (null: "
                  "half_len, all alike); a period that varies keeps a model from predicting by position alone",
                  {.min = 1})
          .option("bos", &Config::bos, "repeated: a <bos> before r r")
          .choice("loss_on", &Config::loss_on_all, {{"second_half", false}, {"all", true}},
                  "repeated: score the tokens of the second copy of r, or every label")
          .option("seq_len", &Config::seq_len, "mqar: tokens per row L (even, below vocab_size)",
                  {.min = 2, .max = kMaxLen})
          .option("num_kv_pairs", &Config::num_kv_pairs, "mqar: key-value pairs per row, each queried once (4 kv <= L)",
                  {.min = 1})
          .option("power_a", &Config::power_a,
                  "mqar: the queries' gaps are drawn with probability proportional to a i^(a-1) (> 0; 1 = uniform)",
                  {.min = 0.0})
          .option("random_non_queries", &Config::random_non_queries,
                  "mqar: positions after the pairs that hold no query get uniform tokens of [0, V) (else token 0)")
          .node("train_len", &Config::train_len, config::Type::List, "[1, 8]",
                "copy, reverse, sort: [min, max] tokens of x in train and val rows (both included)")
          .node("test_len", &Config::test_len, config::Type::Any, "~",
                "copy, reverse, sort: [min, max] tokens of x in test rows (null: train_len), e.g. longer ones for "
                "length generalisation")
          .option("num_train", &Config::num_train, "training rows (with fresh: per epoch)", {.min = 1})
          .option("num_val", &Config::num_val, "validation rows (0 = no split)", {.min = 0})
          .option("num_test", &Config::num_test, "test rows (0 = no split)", {.min = 0})
          .option("batch_size", &Config::batch_size, "rows per batch (the last may be smaller)", {.min = 1})
          .option("seed", &Config::seed, "seed of the generated data (independent of the experiment seed)", {.min = 0})
          .option("fresh", &Config::fresh,
                  "draw new training rows every epoch, from the seed and the epoch's seed (a function of both, so a "
                  "resumed run sees the same rows)");
  return b;
}

config::Schema schema() { return binding().schema(); }

/// x lengths of copy, reverse, sort: [min, max], both included.
struct Lengths {
  int64_t min = 1, max = 1;
};

/// One split's rows: tgt_in and tgt_out [N, T], scored labels [N].
struct Rows {
  torch::Tensor in, out, lens;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
/// A generator seed from two numbers (distinct streams for the splits and the fresh epochs).
uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(splitmix64(a) ^ b); }

/// [n, k] ids of [lo, hi), distinct within a row, in a uniformly random order (k <= hi - lo):
/// Floyd's algorithm draws the set, a Fisher-Yates shuffle orders it. O(n k^2), whatever the pool.
torch::Tensor sample_distinct(int64_t n, int64_t k, int64_t lo, int64_t hi, at::Generator& gen) {
  const int64_t pool = hi - lo;
  const auto u = torch::rand({n, 2 * k}, gen, torch::kDouble);  // [n, 2k]: Floyd's draws, the shuffle's
  auto out = torch::empty({n, k}, torch::kLong);                // [n, k]
  const auto ua = u.accessor<double, 2>();
  auto oa = out.accessor<int64_t, 2>();
  const auto below = [](double x, int64_t m) {
    return std::min(static_cast<int64_t>(x * static_cast<double>(m)), m - 1);
  };
  std::vector<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    chosen.clear();
    for (int64_t j = pool - k, m = 0; j < pool; ++j, ++m) {
      const int64_t t = below(ua[i][m], j + 1);  // in [0, j]
      chosen.push_back(std::find(chosen.begin(), chosen.end(), t) == chosen.end() ? t : j);
    }
    for (int64_t m = k - 1; m > 0; --m) {
      std::swap(chosen[static_cast<size_t>(m)], chosen[static_cast<size_t>(below(ua[i][k + m], m + 1))]);
    }
    for (int64_t m = 0; m < k; ++m) oa[i][m] = lo + chosen[static_cast<size_t>(m)];
  }
  return out;
}

class LmTasks final : public data::Dataset, public data::LanguageModelData {
 public:
  LmTasks(Config c, config::Options o) : c_(std::move(c)), o_(std::move(o)) {
    check_options();
    build_vocabulary();
  }

  void prepare(const std::string&) override {
    for (size_t s = 0; s < 3; ++s) {
      const int64_t n = rows_of(static_cast<Split>(s));
      splits_[s] = n > 0 ? make_rows(n, mix(static_cast<uint64_t>(c_.seed), s), static_cast<Split>(s)) : Rows{};
    }
    prepared_ = true;
  }

  plugin::DataInfo info() const override {
    plugin::DataInfo d;
    d.tgt_vocab_size = static_cast<int64_t>(names_.size());  // src_vocab_size 0: no source
    d.num_steps = num_steps_;
    d.pad_id = pad_;
    d.bos_id = bos_;
    d.eos_id = eos_;
    d.meta.set("lm.task", std::string(task_name(c_.task)));
    d.meta.set("lm.tokens", std::vector<double>{static_cast<double>(low_), static_cast<double>(high_)});
    return d;
  }

  bool has_split(Split split) const override { return rows_of(split) > 0; }

  std::vector<data::Batch> batches(Split split, bool shuffle, uint64_t seed) const override {
    ATTNLAB_CHECK(prepared_, DataError, "lm_tasks: batches() called before prepare()");
    ATTNLAB_CHECK(has_split(split), DataError, "lm_tasks has no '{}' split (its num_{} is 0)", data::split_name(split),
                  data::split_name(split));
    const bool fresh = split == Split::Train && shuffle && c_.fresh;
    const Rows fresh_rows =
        fresh ? make_rows(c_.num_train, mix(mix(static_cast<uint64_t>(c_.seed), 3), seed), split) : Rows{};
    const Rows& d = fresh ? fresh_rows : splits_[static_cast<size_t>(split)];
    const int64_t n = d.in.size(0);
    // Fresh rows are drawn independently: their order is already random.
    const auto order = shuffle && !fresh
                           ? torch::randperm(n, at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong)
                           : torch::arange(n, torch::kLong);  // [N]
    std::vector<data::Batch> out;
    out.reserve(static_cast<size_t>((n + c_.batch_size - 1) / c_.batch_size));
    for (int64_t start = 0; start < n; start += c_.batch_size) {
      const auto idx = order.narrow(0, start, std::min(c_.batch_size, n - start));  // [B]
      data::Batch b;                                   // decoder-only: src, src_valid_lens undefined
      b.tgt_in = d.in.index_select(0, idx);            // [B, T]
      b.tgt_out = d.out.index_select(0, idx);          // [B, T]
      b.tgt_valid_lens = d.lens.index_select(0, idx);  // [B]
      out.push_back(std::move(b));
    }
    return out;
  }

  const data::Vocab* tgt_vocab() const override { return vocab_ ? &*vocab_ : nullptr; }

  /// The tokens' names joined with spaces, <pad> left out, stopping at <eos>.
  std::string decode_target(const std::vector<int64_t>& ids) const override {
    std::vector<int64_t> kept;
    for (int64_t id : ids) {
      if (id == eos_) break;
      if (id != pad_) kept.push_back(id);
    }
    return decode(kept);
  }

  // --- data::LanguageModelData ---
  /// Space-separated tokens, each a name ("<sep>", "17") or an id ("17", "2").
  std::vector<int64_t> encode_prompt(const std::string& text) const override {
    std::vector<int64_t> ids;
    const auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
    size_t pos = 0;
    while (pos < text.size()) {
      if (blank(text[pos])) {
        ++pos;
        continue;
      }
      const size_t start = pos;
      while (pos < text.size() && !blank(text[pos])) ++pos;
      const std::string word = text.substr(start, pos - start);
      const auto id = id_of(word);
      if (!id) {
        throw DataError(fmt::format(
            "lm_tasks: the prompt's token '{}' at byte {} is neither a token's name nor an id in [0, {}): task {} "
            "has the ordinary tokens {} to {}{}",
            word, start, names_.size(), task_name(c_.task), low_, high_ - 1, specials_text()));
      }
      ids.push_back(*id);
    }
    return ids;
  }

  /// The tokens' names joined with spaces ('<pad>' included as named).
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ' ';
      out += name(ids[i]);
    }
    return out;
  }

  std::vector<std::string> token_labels(const std::vector<int64_t>& ids) const override {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int64_t id : ids) out.push_back(name(id));
    return out;
  }

 private:
  // --- options ---

  /// num_train, num_val or num_test.
  int64_t rows_of(Split split) const {
    return split == Split::Train ? c_.num_train : split == Split::Val ? c_.num_val : c_.num_test;
  }

  void check_options() {
    const Task t = c_.task;
    only_for(&Config::half_len, t == Task::Repeated, "repeated");
    only_for(&Config::min_half_len, t == Task::Repeated, "repeated");
    only_for(&Config::bos, t == Task::Repeated, "repeated");
    only_for(&Config::loss_on_all, t == Task::Repeated, "repeated");
    only_for(&Config::seq_len, t == Task::Mqar, "mqar");
    only_for(&Config::num_kv_pairs, t == Task::Mqar, "mqar");
    only_for(&Config::power_a, t == Task::Mqar, "mqar");
    only_for(&Config::random_non_queries, t == Task::Mqar, "mqar");
    only_for(&Config::train_len, transduction(t), "copy, reverse and sort");
    only_for(&Config::test_len, transduction(t), "copy, reverse and sort");
    vocab_ordinary_ = c_.vocab_size.value_or(t == Task::Mqar ? kMqarVocab : kDefaultVocab);
    if (t == Task::Mqar) check_mqar();
    if (c_.min_half_len && *c_.min_half_len > c_.half_len) {
      binding().fail(
          o_, &Config::min_half_len,
          fmt::format("{} exceeds half_len {}: the range of lengths is empty", *c_.min_half_len, c_.half_len));
    }
    if (transduction(t)) {
      lens_[0] = lens_[1] = read_range(&Config::train_len, c_.train_len);
      lens_[2] = c_.test_len.is_null() ? lens_[0] : read_range(&Config::test_len, c_.test_len);
    }
  }

  /// A ConfigError when an option of another task is set to another value than its default (a
  /// stored run's config lists every option, so a default there is no mistake).
  template <class V>
  void only_for(V Config::*field, bool applies, const char* tasks) const {
    const std::string& name = binding().name_of(field);
    if (applies || !o_.given(name)) return;
    static const config::Schema options = schema();
    const auto spec = std::find_if(options.begin(), options.end(), [&](const auto& s) { return s.name == name; });
    if (spec != options.end() && spec->default_value &&
        config::to_yaml(o_.resolved().at(name)) ==
            config::to_yaml(config::parse_yaml(*spec->default_value, "<default>"))) {
      return;
    }
    binding().fail(o_, field, fmt::format("is an option of task {}, not of task {}", tasks, task_name(c_.task)));
  }

  /// Zoology's asserts (input_seq_len even, vocab_size > input_seq_len, 4 num_kv_pairs <=
  /// input_seq_len), each a ConfigError at its option.
  void check_mqar() const {
    const int64_t L = c_.seq_len, V = vocab_ordinary_, kv = c_.num_kv_pairs;
    if (L % 2 != 0) binding().fail(o_, &Config::seq_len, fmt::format("must be even (Zoology's MQAR), found {}", L));
    if (4 * kv > L) {
      binding().fail(o_, &Config::num_kv_pairs,
                     fmt::format("{} pairs and their {} queries need 4 x {} = {} <= seq_len, found seq_len {}", kv, kv,
                                 kv, 4 * kv, L));
    }
    if (V <= L) {
      binding().fail(o_, &Config::vocab_size,
                     fmt::format("must exceed seq_len {} (Zoology's MQAR), found {}{}", L, V,
                                 c_.vocab_size ? "" : " (the default)"));
    }
    if (!(c_.power_a > 0.0)) {
      binding().fail(o_, &Config::power_a,
                     fmt::format("must be > 0: the gaps' probabilities are a i^(a-1), found {}", c_.power_a));
    }
  }

  /// [min, max] from a list option: two integers, 1 <= min <= max <= kMaxLen.
  Lengths read_range(config::Node Config::*field, const config::Node& n) const {
    const auto bad = [&](const std::string& why) { binding().fail(o_, field, why); };
    if (!n.is_seq() || n.size() != 2) bad("expected [min, max]: the fewest and most tokens of x, both included");
    Lengths r;
    try {
      r = {n[0].as_int(), n[1].as_int()};
    } catch (const ConfigError&) {
      bad(fmt::format("expected [min, max] of two integers, found [{}, {}]", n[0].str(), n[1].str()));
    }
    if (r.min < 1) bad(fmt::format("min must be >= 1, found {}", r.min));
    if (r.max < r.min) bad(fmt::format("min {} exceeds max {}: the range of lengths is empty", r.min, r.max));
    if (r.max > kMaxLen) bad(fmt::format("max must be <= {}, found {}", kMaxLen, r.max));
    return r;
  }

  // --- tokens ---

  /// Specials first (<pad>, <unk>, then the task's), then the ordinary tokens named by their ids;
  /// mqar: Zoology's ids 0..V-1, then <pad>.
  void build_vocabulary() {
    names_.clear();
    const auto special = [&](const char* s) {
      names_.emplace_back(s);
      return static_cast<int64_t>(names_.size()) - 1;
    };
    if (c_.task == Task::Mqar) {
      low_ = 0;
      high_ = vocab_ordinary_;
      for (int64_t i = 0; i < high_; ++i) names_.push_back(std::to_string(i));
      pad_ = special("<pad>");
    } else {
      pad_ = special("<pad>");
      special("<unk>");  // never drawn; a data::Vocab has one
      if (c_.task == Task::Repeated && c_.bos) bos_ = special("<bos>");
      if (transduction(c_.task)) {
        sep_ = special("<sep>");
        eos_ = special("<eos>");
      }
      low_ = static_cast<int64_t>(names_.size());
      high_ = low_ + vocab_ordinary_;
      for (int64_t i = low_; i < high_; ++i) names_.push_back(std::to_string(i));
      vocab_ = data::Vocab::in_order(names_);
    }
    for (size_t i = 0; i < names_.size(); ++i) id_of_name_.emplace(names_[i], static_cast<int64_t>(i));
    if (c_.task == Task::Repeated) num_steps_ = 2 * c_.half_len + (c_.bos ? 1 : 0) - 1;
    if (c_.task == Task::Mqar) num_steps_ = c_.seq_len;
    if (transduction(c_.task)) num_steps_ = 2 * std::max(lens_[0].max, lens_[2].max) + 1;
  }

  const std::string& name(int64_t id) const {
    ATTNLAB_CHECK(id >= 0 && id < static_cast<int64_t>(names_.size()), DataError,
                  "lm_tasks: token id {} out of range: task {} has {} tokens", id, task_name(c_.task), names_.size());
    return names_[static_cast<size_t>(id)];
  }

  /// A token's id from its name or from its id written out; nullopt for neither.
  std::optional<int64_t> id_of(const std::string& word) const {
    if (const auto it = id_of_name_.find(word); it != id_of_name_.end()) return it->second;
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec == std::errc() && end == word.data() + word.size() && id >= 0 && id < static_cast<int64_t>(names_.size())) {
      return id;
    }
    return std::nullopt;
  }

  /// ", and <pad> (0), <unk> (1), ...": the specials with their ids.
  std::string specials_text() const {
    std::string out;
    for (size_t i = 0; i < names_.size(); ++i) {
      const auto id = static_cast<int64_t>(i);
      if (id >= low_ && id < high_) continue;
      out += fmt::format("{}{} ({})", out.empty() ? ", and " : ", ", names_[i], id);
    }
    return out;
  }

  // --- rows ---

  Rows make_rows(int64_t n, uint64_t seed, Split split) const {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    switch (c_.task) {
      case Task::Repeated:
        return repeated(n, gen);
      case Task::Mqar:
        return mqar(n, gen);
      default:
        return transduced(n, gen, lens_[static_cast<size_t>(split)]);
    }
  }

  /// [<bos>] r r, right-padded: tgt_in the row less its last token, tgt_out the row less its first.
  Rows repeated(int64_t n, at::Generator& gen) const {
    const int64_t most = c_.half_len, least = c_.min_half_len.value_or(most), b = bos_ >= 0 ? 1 : 0;
    const auto r = torch::randint(low_, high_, {n, most}, gen, torch::kLong);  // [N, most]
    const auto halves = least == most ? torch::full({n}, most, torch::kLong)
                                      : torch::randint(least, most + 1, {n}, gen, torch::kLong);  // [N]
    Rows d;
    d.in = torch::full({n, num_steps_}, pad_, torch::kLong);   // [N, T]
    d.out = torch::full({n, num_steps_}, pad_, torch::kLong);  // [N, T]
    auto in = d.in.accessor<int64_t, 2>(), out = d.out.accessor<int64_t, 2>();
    const auto ra = r.accessor<int64_t, 2>();
    const auto ha = halves.accessor<int64_t, 1>();
    std::vector<int64_t> row;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t h = ha[i], inputs = 2 * h + b - 1;
      row.assign(static_cast<size_t>(b), bos_);
      for (int copy = 0; copy < 2; ++copy) {
        for (int64_t t = 0; t < h; ++t) row.push_back(ra[i][t]);
      }
      for (int64_t t = 0; t < inputs; ++t) {
        in[i][t] = row[static_cast<size_t>(t)];
        // second_half: the last h labels, the tokens of the second copy.
        if (c_.loss_on_all || t >= inputs - h) out[i][t] = row[static_cast<size_t>(t + 1)];
      }
    }
    d.lens = c_.loss_on_all ? halves * 2 + (b - 1) : halves;
    return d;
  }

  /// Zoology's _mqar: k v k v ... then the queries at 2 kv + 2 gap, their values the labels there.
  Rows mqar(int64_t n, at::Generator& gen) const {
    const int64_t V = vocab_ordinary_, L = c_.seq_len, kv = c_.num_kv_pairs;
    const int64_t context = 2 * kv, space = (L - context) / 2;
    const auto keys = sample_distinct(n, kv, 1, V / 2, gen);    // [N, kv] from [1, V/2)
    const auto values = sample_distinct(n, kv, V / 2, V, gen);  // [N, kv] from [V/2, V)
    const double a = c_.power_a;
    const auto p = a * torch::arange(1, space + 1, torch::kDouble).pow(a - 1.0);                          // [space]
    const auto gaps = torch::multinomial((p / p.sum()).expand({n, space}).contiguous(), kv, false, gen);  // [N, kv]
    const auto at = context + 2 * gaps;  // [N, kv] query positions
    Rows d;
    d.in = torch::zeros({n, L}, torch::kLong);  // [N, L]
    d.in.slice(1, 0, context, 2).copy_(keys);
    d.in.slice(1, 1, context, 2).copy_(values);
    d.in.scatter_(1, at, keys);
    d.out = torch::full({n, L}, pad_, torch::kLong).scatter_(1, at, values);  // [N, L]
    if (c_.random_non_queries) {  // Zoology: every 0 left becomes a uniform token of [0, V)
      const auto fill = torch::randint(0, V, {n, L}, gen, torch::kLong);
      d.in = torch::where(d.in == 0, fill, d.in);
    }
    d.lens = torch::full({n}, kv, torch::kLong);
    return d;
  }

  /// x <sep> f(x) <eos>, right-padded to 2 range.max + 1 inputs; labels from <sep> on.
  Rows transduced(int64_t n, at::Generator& gen, Lengths range) const {
    const int64_t T = 2 * range.max + 1;
    const auto x = torch::randint(low_, high_, {n, range.max}, gen, torch::kLong);       // [N, max]
    const auto lens = torch::randint(range.min, range.max + 1, {n}, gen, torch::kLong);  // [N]
    Rows d;
    d.in = torch::full({n, T}, pad_, torch::kLong);
    d.out = torch::full({n, T}, pad_, torch::kLong);
    auto in = d.in.accessor<int64_t, 2>(), out = d.out.accessor<int64_t, 2>();
    const auto xa = x.accessor<int64_t, 2>();
    const auto la = lens.accessor<int64_t, 1>();
    std::vector<int64_t> y;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = la[i];
      y.resize(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) y[static_cast<size_t>(t)] = in[i][t] = xa[i][t];
      if (c_.task == Task::Reverse) std::reverse(y.begin(), y.end());
      if (c_.task == Task::Sort) std::sort(y.begin(), y.end());
      in[i][len] = sep_;
      for (int64_t t = 0; t < len; ++t) in[i][len + 1 + t] = out[i][len + t] = y[static_cast<size_t>(t)];
      out[i][2 * len] = eos_;
    }
    d.lens = lens + 1;  // f(x) and <eos>
    return d;
  }

  Config c_;
  config::Options o_;  // for ConfigErrors at the option's place
  int64_t vocab_ordinary_ = 0;
  std::array<Lengths, 3> lens_;  // copy, reverse, sort: per split (train, val, test)
  std::vector<std::string> names_;
  std::unordered_map<std::string, int64_t> id_of_name_;
  std::optional<data::Vocab> vocab_;  // all but mqar (whose ids have no room for an <unk>)
  int64_t pad_ = -1, bos_ = -1, sep_ = -1, eos_ = -1;
  int64_t low_ = 0, high_ = 0;  // ordinary ids [low, high)
  int64_t num_steps_ = 0;
  bool prepared_ = false;
  std::array<Rows, 3> splits_;
};

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<LmTasks>(binding().read(o), o);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "lm_tasks",
               "synthetic in-context tasks for decoder-only models: repeated tokens (induction heads), Zoology's "
               "multi-query associative recall, copy, reverse, sort",
               schema, make)
