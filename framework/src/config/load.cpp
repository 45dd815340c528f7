// Experiment loading: `defaults:` composition (recursive, cycle-checked), then overrides.
#include <fmt/format.h>

#include <attnlab/config/load.hpp>
#include <attnlab/files.hpp>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "config/detail.hpp"

namespace attnlab::config {

namespace fs = std::filesystem;

namespace {

const Location kCommandLine{"<command line>", 0, 0};

struct Include {
  std::string display;    // path as shown in messages
  std::string canonical;  // identity for cycle detection
};

/// The file's text: a regular file of at most kMaxConfigBytes (files::read_whole: a FIFO, a device
/// or a symlink loop is refused by name, and a /proc file, whose size reads 0, is bounded too).
std::string read_file(const std::string& display, const std::string& from) {
  std::string text;
  const std::string why = files::read_whole(display, kMaxConfigBytes, "a config file", text);
  ATTNLAB_CHECK(why.empty(), ConfigError, "{}: cannot read config file '{}': {}", from, display, why);
  return text;
}

/// The file's identity for cycle detection: its real path, or the normalised path if it has none.
std::string identity(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : fs::path(path).lexically_normal().string();
}

std::string chain_text(const std::vector<Include>& chain, const std::string& last) {
  std::string out;
  for (const auto& c : chain) out += c.display + " -> ";
  return out + last;
}

/// Load one file and everything it includes; `chain` holds the files being loaded above it.
/// `from` names the place that asked for this file (for "missing file" messages).
Node load_file(const std::string& display, const std::string& from, std::vector<Include>& chain) {
  const std::string text = read_file(display, from);
  Node root = parse_yaml(text, display);
  if (root.is_null()) root = Node::map(root.location());
  ATTNLAB_CHECK(root.is_map(), ConfigError, "{}: expected a map at the top level of '{}', found {}",
                root.location().str(), display, detail::describe(root));
  const Node* defaults = root.find("defaults");
  if (defaults == nullptr) return root;

  std::vector<const Node*> entries;
  if (defaults->is_scalar()) {
    entries.push_back(defaults);
  } else if (defaults->is_seq()) {
    for (size_t i = 0; i < defaults->size(); ++i) entries.push_back(&(*defaults)[i]);
  } else if (!defaults->is_null()) {
    throw ConfigError(fmt::format("{}: expected a file name or a list of file names at 'defaults', found {}",
                                  defaults->location().str(), detail::describe(*defaults)));
  }

  Node merged = Node::map(root.location());
  const fs::path dir = fs::path(display).parent_path();
  for (const Node* entry : entries) {
    ATTNLAB_CHECK(entry->is_scalar(), ConfigError, "{}: expected a file name at '{}', found {}",
                  entry->location().str(), entry->path(), detail::describe(*entry));
    const std::string included = (dir / entry->str()).lexically_normal().string();
    const std::string asked = fmt::format("{} (at '{}' in '{}')", entry->location().str(), entry->path(), display);
    const std::string canonical = identity(included);
    for (const auto& c : chain) {
      ATTNLAB_CHECK(c.canonical != canonical, ConfigError, "{}: include cycle: {}", asked, chain_text(chain, included));
    }
    chain.push_back({included, canonical});
    Node sub = load_file(included, asked, chain);
    chain.pop_back();
    merged.merge(sub);
  }
  root.erase("defaults");
  merged.merge(root);
  return merged;
}

/// One step of an override key path: a map key or a list index.
struct Step {
  std::string key;
  std::optional<size_t> index;
};

std::vector<Step> parse_key(const std::string& key, const std::string& assignment) {
  auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("<command line>: malformed override '{}': {}", assignment, why));
  };
  if (key.empty()) throw bad("empty key (expected a.b.c=value)");
  if (const size_t at = detail::bad_utf8_offset(key); at != std::string::npos) {
    throw bad(fmt::format("the key is not UTF-8 text: byte 0x{:02x} at offset {} starts a malformed sequence or a "
                          "Unicode noncharacter",
                          static_cast<unsigned char>(key[at]), at));
  }
  std::vector<Step> steps;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    const std::string token = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // token = name followed by zero or more [index]
    const size_t bracket = token.find('[');
    const std::string name = token.substr(0, bracket);
    if (name.empty()) throw bad(fmt::format("empty key segment in '{}' (expected a.b.c=value)", key));
    steps.push_back({name, std::nullopt});
    size_t i = bracket;
    while (i != std::string::npos && i < token.size()) {
      const size_t close = token.find(']', i);
      if (token[i] != '[' || close == std::string::npos) {
        throw bad(fmt::format("expected '[index]' after '{}' in '{}'", name, key));
      }
      const std::string digits = token.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
        throw bad(fmt::format("expected a list index in '[...]', found '{}'", digits));
      }
      steps.push_back({"", std::stoul(digits)});
      i = close + 1;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return steps;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

}  // namespace

std::string detail::override_key(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  ATTNLAB_CHECK(eq != std::string::npos, ConfigError,
                "<command line>: malformed override '{}': expected key=value (e.g. model.encoder.num_heads=4)",
                assignment);
  return trim(assignment.substr(0, eq));
}

const Node* detail::find_key(const Node& root, const std::string& key) {
  const Node* n = &root;
  for (const Step& step : parse_key(key, key)) {
    if (step.index) {
      if (!n->is_seq() || *step.index >= n->size()) return nullptr;
      n = &(*n)[*step.index];
    } else {
      if (!n->is_map()) return nullptr;
      n = n->find(step.key);
      if (!n) return nullptr;
    }
  }
  return n;
}

void apply_override(Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  const std::string key = detail::override_key(assignment);
  const std::vector<Step> steps = parse_key(key, assignment);

  Node value;
  try {
    value = parse_yaml(assignment.substr(eq + 1), "<command line>");
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("<command line>: malformed override '{}': value is not valid YAML ({})", assignment, e.what()));
  }
  detail::relocate(value, kCommandLine);

  if (root.is_null()) root = Node::map(root.location(), root.path());
  Node* cur = &root;
  std::string walked;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    const bool last = s + 1 == steps.size();
    const std::string here =
        step.index ? fmt::format("{}[{}]", walked, *step.index) : (walked.empty() ? step.key : walked + "." + step.key);
    if (step.index) {
      ATTNLAB_CHECK(cur->is_seq(), ConfigError,
                    "{}: cannot apply override '{}': '{}' is {}, not a list, so it has no item [{}]",
                    cur->location().str(), assignment, walked, detail::describe(*cur), *step.index);
      ATTNLAB_CHECK(*step.index < cur->size(), ConfigError,
                    "{}: cannot apply override '{}': index {} out of range at '{}' (the list has {} items)",
                    cur->location().str(), assignment, *step.index, walked, cur->size());
      Node& item = const_cast<Node&>((*cur)[*step.index]);
      if (last) {
        const std::string path = item.path();
        item = value;
        item.repath(path);
        return;
      }
      cur = &item;
    } else {
      if (cur->is_null()) cur->set(step.key, Node::map(kCommandLine));  // turns the null into a map
      ATTNLAB_CHECK(
          cur->is_map(), ConfigError, "{}: cannot apply override '{}': '{}' is {}, not a map, so it has no key '{}'",
          cur->location().str(), assignment, walked.empty() ? "<top level>" : walked, detail::describe(*cur), step.key);
      if (last) {
        cur->set(step.key, value);
        return;
      }
      Node* next = cur->find(step.key);
      if (next == nullptr) next = &cur->set(step.key, Node::map(kCommandLine));
      cur = next;
    }
    walked = here;
  }
}

Node load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  std::vector<Include> chain;
  chain.push_back({path, identity(path)});
  Node root = load_file(path, "<command line>", chain);
  for (const auto& o : overrides) apply_override(root, o);
  root.repath("");
  return root;
}

}  // namespace attnlab::config
