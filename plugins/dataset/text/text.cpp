// Dataset plugin "text": a character-level language-model corpus for decoder-only models, in
// Batch's decoder-only layout (no source; tgt_out the next token of tgt_in).
//
// - The text: any UTF-8 file (`source: file`, `path`), or one side of a corpus another dataset
//   plugin fetches: the English or French column of fra-eng's pairs (fra_eng.en / fra_eng.fr), or
//   Multi30K's English or German captions (multi30k.en / multi30k.de: its train file for train, its
//   val file for val). The corpora come as fra_eng and multi30k fetch them (../common/corpora.hpp:
//   the same files, pinned sums and cache folder under the data dir; the mirror first).
// - Lines joined with "\n" (itself a token; a CRLF file reads as LF); max_chars > 0 keeps the
//   first max_chars characters (of each file for multi30k).
// - tokenizer chars: one token per Unicode code point. Vocabulary: <pad> (id 0), <unk> (id 1),
//   then the distinct characters of the training text in code-point order; a val character not in
//   training is <unk>.
// - tokenizer: a tokenizer plugin (e.g. {plugin: sentencepiece, vocab_size: 2000}, a BPE model
//   learned from the training text's lines, cached under <data dir>/text/tokenizers): each line is
//   encoded alone and a "\n" token stands between lines. Vocabulary: <pad>, <unk>, "\n", then the
//   tokenizer's inventory (its pieces), or, for a tokenizer without one (d2l_words), the distinct
//   tokens of the training text in sorted order; a val token outside it is <unk>. block_size and
//   the training and val streams count these tokens; the split into train and val stays by characters.
//   A pretrained tokenizer (fixed_ids(): byte_bpe, a model's own) instead gives the ids as they are:
//   the vocabulary is its inventory in its id order, no <pad>, <unk> or "\n" of ours, each split's
//   text is encoded whole (its newlines are the tokenizer's), and pad_id is -1 (id 0 is a token).
// - One token stream, the last val_fraction of it val (contiguous, as nanoGPT's train/val split);
//   multi30k's val is its own file.
// - A training epoch (batches(Train, true, seed)): a phase offset drawn from the seed in
//   [0, block_size) (fewer when the text holds less than two blocks), then the windows of
//   block_size + 1 tokens from there at stride block_size, shuffled by the same generator and cut
//   into batches of batch_size (the last may be smaller): tgt_in = window[:, :-1], tgt_out =
//   window[:, 1:], tgt_valid_lens = block_size. Every token the windows reach is a target once; the
//   offset moves which tokens head and tail leave out from epoch to epoch. A function of the seed
//   alone. Unshuffled training batches and val: offset 0, in order. No test split.
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/data/vocab.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/plugin/registry.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/corpora.hpp"
#include "lines.hpp"

namespace {

using namespace attnlab;
using data::Split;
using datasets::text::joined;
using datasets::text::lines_of;

constexpr const char* kPad = "<pad>";
constexpr const char* kUnk = "<unk>";
constexpr const char* kNewline = "\n";
constexpr int64_t kPadId = 0, kUnkId = 1;  // then the characters (chars), or "\n" and the pieces
constexpr const char* kFile = "file";
constexpr const char* kChars = "chars";

struct Config {
  std::string source = kFile;  // file | fra_eng.en | fra_eng.fr | multi30k.en | multi30k.de
  std::string path;            // the file, for source: file
  config::Node tokenizer;  // "chars", or a tokenizer plugin
  int64_t block_size = 128;
  int64_t batch_size = 32;
  double val_fraction = 0.1;  // (0, 0.5]; file and fra_eng sources
  int64_t max_chars = 0;      // 0 = all
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .choice("source", &Config::source, {kFile, "fra_eng.en", "fra_eng.fr", "multi30k.en", "multi30k.de"},
                  "the text: a UTF-8 file (`path`), the English or French side of the fra-eng pairs, or Multi30K's "
                  "English or German captions (its train file for train, its val file for val); the corpora are "
                  "fetched as the fra_eng and multi30k datasets fetch them (mirror first, pinned sums)")
          .option("path", &Config::path,
                  "the text file for source: file (UTF-8, plain or .gz; a relative path from the working directory)")
          .node("tokenizer", &Config::tokenizer, config::Type::Any, "chars",
                "chars: one token per Unicode code point; or a tokenizer plugin (a name or a map with `plugin:` and "
                "its options, e.g. {plugin: sentencepiece, vocab_size: 2000}) that learns from the training text's "
                "lines, with a \"\\n\" token between lines")
          .option("block_size", &Config::block_size, "tokens per row: the context a model is trained on",
                  {.min = 1, .max = 1 << 20})
          .option("batch_size", &Config::batch_size, "rows per batch (the last batch may be smaller)", {.min = 1})
          .option("val_fraction", &Config::val_fraction,
                  "the last fraction of the token stream that is val, in (0, 0.5] (file and fra_eng sources; "
                  "multi30k has its own val file)",
                  {.min = 0.0, .max = 0.5})
          .option("max_chars", &Config::max_chars,
                  "keep only the first N characters of the text (0 = all; multi30k: of each file), for quick runs "
                  "on a slice of a large corpus",
                  {.min = 0});
  return b;
}

config::Schema schema() { return binding().schema(); }

class TextData final : public data::Dataset, public data::LanguageModelData {
 public:
  TextData(Config c, config::Options o, std::shared_ptr<data::Tokenizer> tokenizer)
      : c_(std::move(c)), o_(std::move(o)), tokenizer_(std::move(tokenizer)) {
    const bool file = c_.source == kFile;
    if (file && c_.path.empty()) {
      binding().fail(o_, &Config::path, "source: file reads a text file: give its path (or a corpus as source)");
    }
    if (!file && !c_.path.empty()) {
      binding().fail(o_, &Config::path,
                     fmt::format("source {} reads its own corpus: path is for source: file", c_.source));
    }
    if (c_.val_fraction <= 0.0) {
      binding().fail(o_, &Config::val_fraction, fmt::format("must be in (0, 0.5], found {}", c_.val_fraction));
    }
    if (multi30k() && o_.given(binding().name_of(&Config::val_fraction))) {
      binding().fail(o_, &Config::val_fraction,
                     fmt::format("source {} has its own val file: val_fraction splits a file or fra_eng source",
                                 c_.source));
    }
  }

  void prepare(const std::string& data_dir) override {
    const std::string dir = data_dir.empty() ? "datasets" : data_dir;
    std::vector<char32_t> train, val;
    std::string val_where;  // where val comes from, for messages
    if (c_.source == kFile) {
      const std::string text = data::read_text_file(c_.path);
      ATTNLAB_CHECK(!text.empty(), DataError, "text: {} is empty: there is nothing to train on", c_.path);
      data::require_utf8(text, c_.path);  // "<path>:<line>: invalid UTF-8 at byte ..."
      where_ = c_.path;
      source_ = fmt::format("file:{}", c_.path);
      val_where = split_stream(read(joined(datasets::text_lines(text))), train, val);
    } else if (multi30k()) {
      const std::string lang = c_.source.substr(c_.source.find('.') + 1);
      const std::vector<std::string> bases = {datasets::multi30k::kUrlBase, datasets::multi30k::kUrlBase2};
      std::string val_path;
      train = read(joined(datasets::multi30k::read_lines(Split::Train, lang, dir, bases, true, where_)));
      val = read(joined(datasets::multi30k::read_lines(Split::Val, lang, dir, bases, true, val_path)));
      source_ = c_.source;
      val_where = fmt::format("{} gives {} val {}", val_path, val.size(), tokenizer_ != nullptr ? "characters" : "tokens");
    } else {
      namespace fe = datasets::fra_eng;
      const std::string zip = data::ensure_file(
          {fe::kRelPath, {fe::kD2lUrl, fe::kManythingsUrl}, {fe::kD2lSha1, fe::kSha256}}, dir);
      const size_t column = c_.source == "fra_eng.en" ? 0 : 1;
      where_ = fmt::format("{} ({} column)", zip, column == 0 ? "English" : "French");
      source_ = c_.source;
      val_where = split_stream(read(joined(fe::pairs_column(fe::read_pairs(zip), column))), train, val);
    }
    if (tokenizer_ != nullptr) {
      tokenize(lines_of(train), lines_of(val), dir);
      // The checks below count the tokenizer's tokens: say so where the counts are.
      where_ = fmt::format("{} in {} tokens", where_, tokenizer_->name());
      val_where = fmt::format("{}, {} {} tokens", val_where, val_ids_.size(0), tokenizer_->name());
    } else {
      build_characters(train, val);
    }
    const int64_t n_train = train_ids_.size(0), n_val = val_ids_.size(0);
    require_blocks(n_train, fmt::format("{} gives {} training tokens", where_, n_train), &Config::block_size,
                   c_.max_chars > 0 ? "lower block_size or raise max_chars" : "lower block_size or use a longer text");
    if (multi30k()) {
      require_blocks(n_val, val_where, &Config::block_size,
                     c_.max_chars > 0 ? "lower block_size or raise max_chars" : "lower block_size");
    } else {
      require_blocks(n_val, val_where, &Config::val_fraction, "raise val_fraction or lower block_size");
    }
    prepared_ = true;
  }

  plugin::DataInfo info() const override {
    require_prepared("info()");
    plugin::DataInfo d;
    d.tgt_vocab_size = vocab_.size();  // src_vocab_size 0: no source; no <bos> or <eos>
    d.num_steps = c_.block_size;
    d.pad_id = fixed_ids() ? -1 : kPadId;  // a pretrained tokenizer's id 0 is a real token
    d.meta.set("lm.block_size", c_.block_size);
    d.meta.set("lm.tokens_train", train_ids_.size(0));
    d.meta.set("lm.tokens_val", val_ids_.size(0));
    d.meta.set("lm.source", source_);
    d.meta.set("lm.tokenizer", tokenizer_ != nullptr ? tokenizer_->description() : std::string(kChars));
    return d;
  }

  bool has_split(Split split) const override { return split != Split::Test; }

  std::vector<data::Batch> batches(Split split, bool shuffle, uint64_t seed) const override {
    require_prepared("batches()");
    ATTNLAB_CHECK(has_split(split), DataError, "text has no '{}' split (only train and val)", data::split_name(split));
    const torch::Tensor& ids = split == Split::Train ? train_ids_ : val_ids_;  // [N]
    const int64_t n = ids.size(0), T = c_.block_size;
    torch::Tensor windows, order;  // [W, T + 1]; [W] row order (undefined: in order)
    if (split == Split::Train && shuffle) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
      const int64_t most = std::min(T - 1, n - T - 1);  // the offset leaves one window at least
      const int64_t offset = torch::randint(0, most + 1, {1}, gen, torch::kLong).item<int64_t>();
      windows = ids.narrow(0, offset, n - offset).unfold(0, T + 1, T);
      order = torch::randperm(windows.size(0), gen, torch::kLong);
    } else {
      windows = ids.unfold(0, T + 1, T);
    }
    const int64_t w = windows.size(0);
    std::vector<data::Batch> out;
    out.reserve(static_cast<size_t>((w + c_.batch_size - 1) / c_.batch_size));
    for (int64_t start = 0; start < w; start += c_.batch_size) {
      const int64_t rows = std::min(c_.batch_size, w - start);
      const auto block = order.defined() ? windows.index_select(0, order.narrow(0, start, rows))
                                         : windows.narrow(0, start, rows);  // [B, T + 1]
      data::Batch b;  // decoder-only: src, src_valid_lens undefined
      b.tgt_in = block.narrow(1, 0, T).contiguous();   // [B, T]
      b.tgt_out = block.narrow(1, 1, T).contiguous();  // [B, T]
      b.tgt_valid_lens = torch::full({rows}, T, torch::kLong);
      out.push_back(std::move(b));
    }
    return out;
  }

  const data::Vocab* tgt_vocab() const override { return &vocab_; }
  std::string decode_target(const std::vector<int64_t>& ids) const override { return decode(ids); }

  // --- data::LanguageModelData ---
  std::vector<int64_t> encode_prompt(const std::string& text) const override {
    require_prepared("encode_prompt()");
    if (tokenizer_ != nullptr) return encode_prompt_pieces(text);
    std::vector<char32_t> chars;
    try {
      chars = data::code_points(text);
    } catch (const DataError& e) {
      throw DataError(fmt::format("text: the prompt is not UTF-8: {}", e.what()));
    }
    std::vector<int64_t> ids;
    ids.reserve(chars.size());
    size_t byte = 0;
    for (char32_t ch : chars) {
      const auto it = id_of_.find(ch);
      if (it == id_of_.end()) {
        throw DataError(fmt::format(
            "text: the prompt's character '{}' (U+{:04X}) at byte {} is not in the vocabulary: the training text "
            "({}) has {} distinct characters",
            label(data::utf8_char(ch)), static_cast<uint32_t>(ch), byte, where_, vocab_.size() - 2));
      }
      ids.push_back(it->second);
      byte += data::utf8_char(ch).size();
    }
    return ids;
  }

  /// The characters (or each line's pieces decoded by the tokenizer); <pad> adds nothing, <unk>
  /// is U+FFFD (the replacement character).
  std::string decode(const std::vector<int64_t>& ids) const override {
    require_prepared("decode()");
    if (fixed_ids()) {
      std::vector<std::string> pieces;
      pieces.reserve(ids.size());
      for (int64_t id : ids) pieces.push_back(vocab_.token(id));  // DataError for an id out of range
      return tokenizer_->decode(pieces);
    }
    std::string out;
    std::vector<std::string> pieces;  // a tokenizer's, since the last newline or <unk>
    const auto flush = [&] {
      if (!pieces.empty()) out += tokenizer_->decode(pieces);
      pieces.clear();
    };
    for (int64_t id : ids) {
      const std::string& token = vocab_.token(id);  // DataError for an id out of range
      if (id == kPadId) continue;
      if (tokenizer_ == nullptr) {
        out += id == kUnkId ? "\uFFFD" : token;
      } else if (id == kUnkId || id == newline_id_) {
        flush();
        out += id == kUnkId ? "\uFFFD" : kNewline;
      } else {
        pieces.push_back(token);
      }
    }
    if (tokenizer_ != nullptr) flush();
    return out;
  }

  std::vector<std::string> token_labels(const std::vector<int64_t>& ids) const override {
    require_prepared("token_labels()");
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int64_t id : ids) out.push_back(label(vocab_.token(id)));
    return out;
  }

 private:
  bool multi30k() const { return c_.source.rfind("multi30k.", 0) == 0; }

  void require_prepared(const char* what) const {
    ATTNLAB_CHECK(prepared_, DataError, "text: {} called before prepare()", what);
  }

  /// A token's label on a plot's axis: whitespace made visible.
  static std::string label(const std::string& token) {
    if (token == "\n") return "\\n";
    if (token == "\t") return "\\t";
    if (token == "\r") return "\\r";
    if (token == " ") return "\u2423";  // ␣
    return token;
  }

  /// UTF-8 text -> its characters, the first max_chars of them when max_chars > 0 (decoding no
  /// more of a large corpus than those can take: at most 4 bytes each, cut where a character starts).
  std::vector<char32_t> read(const std::string& text) const {
    const auto most = static_cast<size_t>(c_.max_chars);
    if (most == 0 || most >= text.size()) return data::code_points(text);  // no fewer bytes than characters
    size_t end = std::min(text.size(), most * 4);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    std::vector<char32_t> chars = data::code_points(text.substr(0, end));
    if (chars.size() > most) chars.resize(most);
    return chars;
  }

  /// The stream's first part train, its last val_fraction val (nanoGPT's int(n * 0.9) for 0.1).
  /// Returns what val is, for messages.
  std::string split_stream(std::vector<char32_t> all, std::vector<char32_t>& train,
                           std::vector<char32_t>& val) const {
    const auto n = static_cast<int64_t>(all.size());
    const auto n_train = static_cast<int64_t>(static_cast<double>(n) * (1.0 - c_.val_fraction));
    val.assign(all.begin() + n_train, all.end());
    all.resize(static_cast<size_t>(n_train));
    train = std::move(all);
    const char* unit = tokenizer_ != nullptr ? "characters" : "tokens";  // a tokenizer's are counted later
    return fmt::format("the last {} of the {} {} of {} is {} {}", c_.val_fraction, n, unit, where_, val.size(), unit);
  }

  /// A ConfigError at `field` unless `tokens` hold one block (block_size + 1 tokens): "<what>, one
  /// block needs N (...): <fix>".
  template <class V>
  void require_blocks(int64_t tokens, const std::string& what, V Config::*field, const char* fix) const {
    const int64_t need = c_.block_size + 1;
    if (tokens >= need) return;
    binding().fail(o_, field,
                   fmt::format("{}, one block needs {} (block_size {} + 1{}): {}", what, need, c_.block_size,
                               c_.max_chars > 0 ? fmt::format("; max_chars {} cut the text", c_.max_chars) : "", fix));
  }

  /// The character vocabulary of the training text, and both streams' ids.
  void build_characters(const std::vector<char32_t>& train, const std::vector<char32_t>& val) {
    const std::set<char32_t> chars(train.begin(), train.end());  // distinct, in code-point order
    std::vector<std::string> tokens = {kPad, kUnk};
    id_of_.clear();
    for (char32_t ch : chars) {
      id_of_.emplace(ch, static_cast<int64_t>(tokens.size()));
      tokens.push_back(data::utf8_char(ch));
    }
    vocab_ = data::Vocab::in_order(std::move(tokens));
    train_ids_ = encode(train);
    val_ids_ = encode(val);
  }

  /// The tokenizer learns from the training lines (or reuses its cached model), the vocabulary is
  /// <pad>, <unk>, "\n" and its pieces, and both streams are encoded line by line.
  void tokenize(const std::vector<std::string>& train, const std::vector<std::string>& val, const std::string& dir) {
    std::vector<std::string> corpus;
    for (const auto& line : train) {
      if (!line.empty()) corpus.push_back(line);
    }
    ATTNLAB_CHECK(!corpus.empty(), DataError, "text: {} has no line with text for the tokenizer to learn from", where_);
    tokenizer_->train(corpus, dir + "/text/tokenizers");
    if (tokenizer_->fixed_ids()) {  // a pretrained model's ids: exactly the tokenizer's, whole text
      vocab_ = data::Vocab::in_order(tokenizer_->vocabulary(), /*with_unk=*/false);
      train_ids_ = encode_text(joined(train));
      val_ids_ = encode_text(joined(val));
      return;
    }
    std::vector<std::string> tokens = {kPad, kUnk, kNewline};
    std::set<std::string> seen(tokens.begin(), tokens.end());
    std::vector<std::string> inventory = tokenizer_->vocabulary();
    if (inventory.empty()) {  // an open-ended tokenizer: the training text's tokens, sorted
      std::set<std::string> distinct;
      for (const auto& line : corpus) {
        for (auto& t : tokenizer_->encode(line)) distinct.insert(std::move(t));
      }
      inventory.assign(distinct.begin(), distinct.end());
    }
    for (auto& t : inventory) {
      if (seen.insert(t).second) tokens.push_back(std::move(t));
    }
    vocab_ = data::Vocab::in_order(std::move(tokens));
    newline_id_ = vocab_[kNewline];
    train_ids_ = encode_lines(train);
    val_ids_ = encode_lines(val);
  }

  /// Text -> ids [N] through a fixed-ids tokenizer (newlines are its own tokens).
  torch::Tensor encode_text(const std::string& text) const {
    std::vector<int64_t> ids;
    for (const auto& piece : tokenizer_->encode(text)) ids.push_back(vocab_[piece]);  // DataError if absent
    return torch::tensor(ids, torch::kLong);
  }

  bool fixed_ids() const { return tokenizer_ != nullptr && tokenizer_->fixed_ids(); }

  /// Lines -> ids [N]: each line's pieces (<unk> for one outside the vocabulary), "\n" between lines.
  torch::Tensor encode_lines(const std::vector<std::string>& lines) const {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) ids.push_back(newline_id_);
      if (lines[i].empty()) continue;
      for (const auto& piece : tokenizer_->encode(lines[i])) ids.push_back(vocab_[piece]);  // unk id when absent
    }
    return torch::tensor(ids, torch::kLong);
  }

  /// A prompt in the tokenizer's pieces (line by line, or whole for fixed ids); a piece outside the
  /// vocabulary is a DataError naming it.
  std::vector<int64_t> encode_prompt_pieces(const std::string& text) const {
    try {
      data::code_points(text);
    } catch (const DataError& e) {
      throw DataError(fmt::format("text: the prompt is not UTF-8: {}", e.what()));
    }
    if (fixed_ids()) {  // the whole text, newlines included, in the tokenizer's own ids
      const auto ids = encode_text(text);
      return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()};
    }
    std::vector<int64_t> ids;
    size_t start = 0;
    for (size_t line = 1;; ++line) {
      const size_t end = text.find('\n', start);
      const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
      for (const auto& piece : part.empty() ? std::vector<std::string>{} : tokenizer_->encode(part)) {
        const int64_t id = vocab_[piece];
        if (id == kUnkId) {
          throw DataError(fmt::format(
              "text: the prompt's piece '{}' (line {} of the prompt) is not in the vocabulary of {} ({} tokens, "
              "learned from {})",
              label(piece), line, tokenizer_->description(), vocab_.size(), where_));
        }
        ids.push_back(id);
      }
      if (end == std::string::npos) break;
      ids.push_back(newline_id_);
      start = end + 1;
    }
    return ids;
  }

  /// Characters -> ids [N] (a character not in the vocabulary: <unk>).
  torch::Tensor encode(const std::vector<char32_t>& chars) const {
    auto ids = torch::empty({static_cast<int64_t>(chars.size())}, torch::kLong);  // [N]
    auto* p = ids.data_ptr<int64_t>();
    for (char32_t ch : chars) {
      const auto it = id_of_.find(ch);
      *p++ = it == id_of_.end() ? kUnkId : it->second;
    }
    return ids;
  }

  Config c_;
  config::Options o_;  // for ConfigErrors found in prepare(), at the option's place
  std::shared_ptr<data::Tokenizer> tokenizer_;  // none: characters
  int64_t newline_id_ = -1;                     // with a tokenizer
  bool prepared_ = false;
  std::string where_;   // the training text, for messages
  std::string source_;  // lm.source: "file:<path>" or the corpus
  data::Vocab vocab_;
  std::unordered_map<char32_t, int64_t> id_of_;  // character -> id
  torch::Tensor train_ids_, val_ids_;            // [N_train], [N_val]
};

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  Config c = binding().read(o);
  std::shared_ptr<data::Tokenizer> tokenizer;
  if (!(c.tokenizer.is_scalar() && c.tokenizer.str() == kChars)) {
    ATTNLAB_CHECK(ctx.registry != nullptr, PluginError,
                  "text needs the plugin registry in its build context to create its tokenizer");
    tokenizer = ctx.registry->create<data::Tokenizer>(c.tokenizer, ctx);
  }
  return std::make_shared<TextData>(std::move(c), o, std::move(tokenizer));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "text",
               "language-model text (a file, or one side of fra-eng or Multi30K), one token per character or a "
               "tokenizer plugin's (SentencePiece BPE), in decoder-only batches of block_size tokens",
               schema, make)
