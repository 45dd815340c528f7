// Dataset plugin "lm_tasks": synthetic in-context tasks for decoder-only language models, in
// Batch's decoder-only layout (no source; tgt_out the next token of tgt_in, '<pad>' where a label
// is not scored; tgt_valid_lens the count of scored labels of a row). Every row is drawn from the
// data's own seed in prepare(); `fresh: true` draws new training rows for every epoch from (seed,
// the epoch's seed) instead. Tasks (`task`): repeated ([<bos>] r r, induction heads), mqar
// (Zoology's multi-query associative recall), copy, reverse, sort (x <sep> f(x) <eos>); tasks.hpp
// describes each task's rows, tasks.cpp draws them. This file: the options and their checks, the
// vocabulary, the splits and their batches, data::LanguageModelData, the registration.
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

#include "tasks.hpp"

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
using namespace datasets::lm_tasks;

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
    if (c_.task == Task::Repeated) num_steps_ = repeated_params().steps();
    if (c_.task == Task::Mqar) num_steps_ = c_.seq_len;
    // Val's lengths are train's.
    if (transduction(c_.task)) {
      num_steps_ = std::max(transduced_params(Split::Train).steps(), transduced_params(Split::Test).steps());
    }
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

  /// n rows of the task (tasks.hpp), drawn from a generator seeded with `seed`.
  Rows make_rows(int64_t n, uint64_t seed, Split split) const {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    switch (c_.task) {
      case Task::Repeated:
        return repeated(n, repeated_params(), gen);
      case Task::Mqar:
        return mqar(n, mqar_params(), gen);
      default:
        return transduced(n, transduced_params(split), gen);
    }
  }

  // The generators' parameters: the options with the vocabulary's ids (build_vocabulary()).

  RepeatedParams repeated_params() const {
    return {.low = low_,
            .high = high_,
            .half_len = c_.half_len,
            .min_half_len = c_.min_half_len.value_or(c_.half_len),
            .pad = pad_,
            .bos = bos_,
            .loss_on_all = c_.loss_on_all};
  }

  MqarParams mqar_params() const {
    return {.vocab_size = vocab_ordinary_,
            .seq_len = c_.seq_len,
            .num_kv_pairs = c_.num_kv_pairs,
            .power_a = c_.power_a,
            .random_non_queries = c_.random_non_queries,
            .pad = pad_};
  }

  TransducedParams transduced_params(Split split) const {
    return {.task = c_.task,
            .low = low_,
            .high = high_,
            .lengths = lens_[static_cast<size_t>(split)],
            .pad = pad_,
            .sep = sep_,
            .eos = eos_};
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
