// Reading tokenizer.json, or vocab.json + merges.txt (hf_files.hpp).
#include "hf_files.hpp"

#include "byte_map.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace attnlab::tokenizers::byte_bpe {
namespace {

using json = nlohmann::json;

/// The largest file read (Llama 3's tokenizer.json has 9 MB; the largest vocabularies, tens).
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 30;
constexpr const char* kWhatWeRead = "(it reads byte-level BPE: GPT-2, Llama 3)";

std::string read_text(const std::string& file) {
  std::string text;
  const std::string why = files::read_whole(file, kMaxBytes, "a tokenizer file", text);
  ATTNLAB_CHECK(why.empty(), DataError, "byte_bpe: cannot read {}: {}", file, why);
  return text;
}

/// The JSON document in `file`; a syntax error names the file and its line and column.
json read_json(const std::string& file) {
  const std::string text = read_text(file);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    std::string why = e.what();  // "[json.exception.parse_error.101] parse error at line 3, column 7: ..."
    if (const size_t end = why.find("] "); why.rfind("[json.exception", 0) == 0 && end != std::string::npos) {
      why = why.substr(end + 2);
    }
    throw DataError(fmt::format("{}: not valid JSON: {} (byte {})", file, why, e.byte));
  }
}

/// A JSON string, or "" for null or absent; anything else is refused, naming the key.
std::string string_or_empty(const json& object, const char* key, const std::string& file, const std::string& at) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  ATTNLAB_CHECK(it->is_string(), DataError, "{}: {}{} must be a string or null, not {}", file, at, key, it->dump());
  return it->get<std::string>();
}

bool bool_or(const json& object, const char* key, bool fallback, const std::string& file, const std::string& at) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  ATTNLAB_CHECK(it->is_boolean(), DataError, "{}: {}{} must be true or false, not {}", file, at, key, it->dump());
  return it->get<bool>();
}

[[noreturn]] void refuse(const std::string& file, const std::string& what) {
  throw DataError(fmt::format("{}: {} is not read by attnlab's byte_bpe {}", file, what, kWhatWeRead));
}

/// The type of a tokenizer.json component ("ByteLevel"), or "" when it has none.
std::string type_of(const json& component) {
  const auto it = component.find("type");
  return it != component.end() && it->is_string() ? it->get<std::string>() : "";
}

/// A pre-tokenizer (recursively for Sequence) into f.splits; `byte_level` is set at ByteLevel,
/// which must be the last step (the steps before it split text, it maps bytes to characters).
void read_pre_tokenizer(const json& p, const std::string& file, BpeFiles& f, bool& byte_level) {
  ATTNLAB_CHECK(p.is_object(), DataError, "{}: a pre_tokenizer must be an object, not {}", file, p.dump());
  const std::string type = type_of(p);
  if (byte_level) refuse(file, fmt::format("a pre-tokenizer step after ByteLevel ('{}')", type));
  if (type == "Sequence") {
    const auto steps = p.find("pretokenizers");
    ATTNLAB_CHECK(steps != p.end() && steps->is_array(), DataError,
                  "{}: pre_tokenizer Sequence has no pretokenizers list", file);
    for (const auto& step : *steps) read_pre_tokenizer(step, file, f, byte_level);
  } else if (type == "ByteLevel") {
    if (bool_or(p, "add_prefix_space", false, file, "pre_tokenizer.")) {
      refuse(file, "pre_tokenizer ByteLevel with add_prefix_space: true");
    }
    if (bool_or(p, "use_regex", true, file, "pre_tokenizer.")) f.splits.push_back({kGpt2Pattern, false});
    byte_level = true;
  } else if (type == "Split") {
    const std::string behavior = string_or_empty(p, "behavior", file, "pre_tokenizer Split.");
    if (behavior != "Isolated")
      refuse(file, fmt::format("pre_tokenizer Split with behavior '{}' (not Isolated)", behavior));
    if (bool_or(p, "invert", false, file, "pre_tokenizer Split."))
      refuse(file, "pre_tokenizer Split with invert: true");
    const auto pattern = p.find("pattern");
    ATTNLAB_CHECK(pattern != p.end() && pattern->is_object(), DataError, "{}: pre_tokenizer Split has no pattern",
                  file);
    if (const std::string regex = string_or_empty(*pattern, "Regex", file, "pre_tokenizer Split.pattern.");
        !regex.empty()) {
      f.splits.push_back({regex, false});
    } else if (const std::string s = string_or_empty(*pattern, "String", file, "pre_tokenizer Split.pattern.");
               !s.empty()) {
      f.splits.push_back({s, true});
    } else {
      throw DataError(
          fmt::format("{}: pre_tokenizer Split's pattern has neither Regex nor String: {}", file, pattern->dump()));
    }
  } else {
    refuse(file, fmt::format("pre-tokenizer '{}'", type.empty() ? p.dump() : type));
  }
}

/// The token -> id map of a vocab object ({"token": id, ...}).
std::unordered_map<std::string, int32_t> read_vocab(const json& vocab, const std::string& file, const std::string& at) {
  ATTNLAB_CHECK(vocab.is_object(), DataError, "{}: {} must be an object of token: id, not {}", file, at,
                vocab.type_name());
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [token, id] : vocab.items()) {
    ATTNLAB_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < INT32_MAX, DataError,
                  "{}: {}: the id of '{}' must be a non-negative integer, not {}", file, at, token, id.dump());
    ids.emplace(token, id.get<int32_t>());
  }
  return ids;
}

/// Adds the merge of `left` and `right` to f.merges; `where` names it for messages ("file:3").
void add_merge(BpeFiles& f, const std::string& left, const std::string& right, const std::string& where) {
  Merge m;
  for (const auto& [token, id] : {std::pair{&left, &m.left}, {&right, &m.right}}) {
    const auto it = f.ids.find(*token);
    ATTNLAB_CHECK(it != f.ids.end(), DataError, "{}: the merge '{} {}' names '{}', which is not in the vocabulary",
                  where, left, right, *token);
    *id = it->second;
  }
  const auto merged = f.ids.find(left + right);
  ATTNLAB_CHECK(merged != f.ids.end(), DataError, "{}: the merge '{} {}' makes '{}', which is not in the vocabulary",
                where, left, right, left + right);
  m.merged = merged->second;
  f.merges.push_back(m);
}

/// f.tokens from f.ids and f.added: every id 0..V-1 exactly once, one token per id.
void number_tokens(BpeFiles& f) {
  std::unordered_map<std::string, int32_t> all = f.ids;
  for (const auto& a : f.added) {
    const auto [it, fresh] = all.emplace(a.content, a.id);
    ATTNLAB_CHECK(fresh || it->second == a.id, DataError,
                  "{}: the added token '{}' has id {}, but the vocabulary gives it id {}", f.source, a.content, a.id,
                  it->second);
  }
  f.tokens.assign(all.size(), std::string());
  std::vector<bool> seen(all.size(), false);
  for (const auto& [token, id] : all) {
    ATTNLAB_CHECK(static_cast<size_t>(id) < f.tokens.size(), DataError,
                  "{}: ids must run from 0 to {} (one per token), but '{}' has id {}", f.source, all.size() - 1, token,
                  id);
    ATTNLAB_CHECK(!seen[id], DataError, "{}: id {} is given to both '{}' and '{}'", f.source, id, f.tokens[id], token);
    seen[id] = true;
    f.tokens[id] = token;
  }
}

void read_tokenizer_json(const std::string& file, BpeFiles& f) {
  const json j = read_json(file);
  ATTNLAB_CHECK(j.is_object(), DataError, "{}: a tokenizer.json is a JSON object, not {}", file, j.type_name());
  const auto model = j.find("model");
  ATTNLAB_CHECK(model != j.end() && model->is_object(), DataError,
                "{}: has no model (not a Hugging Face tokenizer.json)", file);
  const std::string type = type_of(*model);
  if (type != "BPE" && !(type.empty() && model->contains("merges"))) {
    refuse(file, fmt::format("model type '{}'", type.empty() ? "(none)" : type));
  }
  if (const auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
    const auto steps = n->find("normalizers");
    const bool empty_sequence = type_of(*n) == "Sequence" && steps != n->end() && steps->empty();
    if (!empty_sequence) refuse(file, fmt::format("normalizer '{}' (byte_bpe encodes text as given)", type_of(*n)));
  }
  const auto pre = j.find("pre_tokenizer");
  if (pre == j.end() || pre->is_null()) refuse(file, "a tokenizer without a pre-tokenizer (no ByteLevel)");
  bool byte_level = false;
  read_pre_tokenizer(*pre, file, f, byte_level);
  if (!byte_level) refuse(file, "a pre-tokenizer without a ByteLevel step");

  if (const auto d = model->find("dropout"); d != model->end() && !d->is_null()) {
    refuse(file, fmt::format("BPE dropout {} (random merges; set it to null)", d->dump()));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const std::string s = string_or_empty(*model, key, file, "model."); !s.empty()) {
      refuse(file, fmt::format("model.{} '{}'", key, s));
    }
  }
  if (bool_or(*model, "byte_fallback", false, file, "model.")) refuse(file, "model.byte_fallback: true");
  f.ignore_merges = bool_or(*model, "ignore_merges", false, file, "model.");
  f.fuse_unk = bool_or(*model, "fuse_unk", false, file, "model.");

  const auto vocab = model->find("vocab");
  ATTNLAB_CHECK(vocab != model->end(), DataError, "{}: has no model.vocab", file);
  f.ids = read_vocab(*vocab, file, "model.vocab");
  const auto merges = model->find("merges");
  ATTNLAB_CHECK(merges != model->end() && merges->is_array(), DataError, "{}: has no model.merges list", file);
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string where = fmt::format("{}: model.merges[{}]", file, i);
    if (m.is_string()) {  // "a b", the format before tokenizers 0.20
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      ATTNLAB_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, DataError,
                    "{}: '{}' is not two tokens separated by one space", where, s);
      add_merge(f, s.substr(0, space), s.substr(space + 1), where);
    } else {
      ATTNLAB_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), DataError,
                    "{}: {} is not a pair of tokens", where, m.dump());
      add_merge(f, m[0].get<std::string>(), m[1].get<std::string>(), where);
    }
  }
  if (const std::string unk = string_or_empty(*model, "unk_token", file, "model."); !unk.empty()) {
    const auto it = f.ids.find(unk);
    ATTNLAB_CHECK(it != f.ids.end(), DataError, "{}: model.unk_token '{}' is not in the vocabulary", file, unk);
    f.unk = it->second;
  }

  if (const auto added = j.find("added_tokens"); added != j.end() && !added->is_null()) {
    ATTNLAB_CHECK(added->is_array(), DataError, "{}: added_tokens must be a list", file);
    for (const auto& a : *added) {
      const auto id = a.find("id");
      const auto content = a.find("content");
      ATTNLAB_CHECK(a.is_object() && id != a.end() && id->is_number_integer() && id->get<int64_t>() >= 0 &&
                        content != a.end() && content->is_string() && !content->get<std::string>().empty(),
                    DataError, "{}: an added token needs a non-negative id and a non-empty content: {}", file,
                    a.dump());
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        if (bool_or(a, flag, false, file, "added_tokens.")) {
          refuse(file, fmt::format("the added token {} with {}: true", content->dump(), flag));
        }
      }
      f.added.push_back({content->get<std::string>(), id->get<int32_t>(), bool_or(a, "normalized", false, file, "")});
    }
  }
}

/// vocab.json + merges.txt (GPT-2's files). The added tokens are the vocabulary's entries that no
/// merge makes and that are no single byte (GPT-2's <|endoftext|>): BPE cannot reach them, so they
/// stand for themselves in text, as transformers' GPT2Tokenizer treats <|endoftext|>.
void read_vocab_and_merges(const std::string& vocab_file, const std::string& merges_file, BpeFiles& f) {
  f.ids = read_vocab(read_json(vocab_file), vocab_file, "the vocabulary");
  const std::string text = read_text(merges_file);
  size_t line_no = 0;
  std::unordered_set<int32_t> made;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    const std::string where = fmt::format("{}:{}", merges_file, line_no);
    const size_t space = line.find(' ');
    ATTNLAB_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                      line.find(' ', space + 1) == std::string::npos,
                  DataError, "{}: '{}' is not a merge (two tokens separated by one space)", where, line);
    add_merge(f, line.substr(0, space), line.substr(space + 1), where);
    made.insert(f.merges.back().merged);
  }
  std::unordered_set<std::string> bytes(byte_chars().begin(), byte_chars().end());
  for (const auto& [token, id] : f.ids) {
    if (!made.contains(id) && !bytes.contains(token)) f.added.push_back({token, id, false});
  }
  f.splits.push_back({kGpt2Pattern, false});
}

}  // namespace

BpeFiles read_hf_files(const std::string& path) {
  BpeFiles f;
  const bool folder = files::problem(path, files::Want::Directory).empty();
  if (!folder) {
    const std::string why = files::problem(path, files::Want::File);
    ATTNLAB_CHECK(why.empty(), DataError,
                  "byte_bpe: {}: {} (a folder with tokenizer.json, or vocab.json and "
                  "merges.txt, or a tokenizer.json file)",
                  path, why);
    const std::string name = path.substr(path.find_last_of('/') + 1);
    ATTNLAB_CHECK(name != "vocab.json" && name != "merges.txt", DataError,
                  "byte_bpe: {}: give the folder that holds vocab.json and merges.txt, not one of them", path);
    f.source = path;
    read_tokenizer_json(path, f);
  } else {
    const std::string base = path.back() == '/' ? path : path + "/";
    if (files::problem(base + "tokenizer.json", files::Want::File).empty()) {
      f.source = base + "tokenizer.json";
      read_tokenizer_json(f.source, f);
    } else {
      const bool vocab = files::problem(base + "vocab.json", files::Want::File).empty();
      const bool merges = files::problem(base + "merges.txt", files::Want::File).empty();
      ATTNLAB_CHECK(vocab && merges, DataError,
                    "byte_bpe: {} holds neither tokenizer.json nor vocab.json and "
                    "merges.txt{}",
                    path,
                    vocab    ? " (merges.txt is missing)"
                    : merges ? " (vocab.json is missing)"
                             : "");
      f.source = base + "vocab.json + merges.txt";
      read_vocab_and_merges(base + "vocab.json", base + "merges.txt", f);
    }
  }
  number_tokens(f);
  return f;
}

}  // namespace attnlab::tokenizers::byte_bpe
