// yaml-cpp <-> Node: parsing with locations and paths, duplicate-key detection, block-style emit.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <attnlab/config/node.hpp>
#include <map>

#include "config/detail.hpp"

namespace attnlab::config {

namespace {

Location location_of(const YAML::Mark& mark, const std::string& file) {
  if (mark.line < 0) return Location{file, 0, 0};  // null_mark: position unknown
  return Location{file, mark.line + 1, mark.column + 1};
}

std::string key_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

/// Counts the values converted so far; refuses a tree larger than kMaxConfigNodes. yaml-cpp keeps
/// an aliased node once, so the count is what matters: `*a` repeated expands here ("billion laughs"
/// is a few lines that expand to billions of values).
void count_node(size_t& count, const Location& loc) {
  ATTNLAB_CHECK(++count <= kMaxConfigNodes, ConfigError,
                "{}: the YAML tree has more than {} values (aliases expanded); a config has hundreds, so this is "
                "refused",
                loc.str(), kMaxConfigNodes);
}

/// The deepest nesting converted. yaml-cpp 0.7 refuses documents nested deeper than 498
/// collections itself ("bad file"), but an alias inside the node it names (`a: &x [*x]`) is a cycle that
/// recursed here until the stack overflowed (a segfault of the runner).
constexpr int kMaxDepth = 1000;

/// ConfigError at `loc` unless `text` (a scalar or a map key) is UTF-8 text.
void require_utf8(const std::string& text, const Location& loc, const std::string& path, const char* what) {
  const size_t at = detail::bad_utf8_offset(text);
  ATTNLAB_CHECK(at == std::string::npos, ConfigError,
                "{}: the {} at '{}' is not UTF-8 text: byte 0x{:02x} at offset {} starts a malformed sequence or a "
                "Unicode noncharacter (config files must be UTF-8)",
                loc.str(), what, path.empty() ? std::string("<top level>") : path,
                static_cast<unsigned char>(text[at]), at);
}

/// `loc` is where the value should be reported: its own mark for scalars, its key's mark for
/// collections and nulls given as map values (the key line is what the user looks for).
Node convert(const YAML::Node& y, const std::string& file, const Location& loc, const std::string& path,
             size_t& count, int depth = 0) {
  count_node(count, loc);
  ATTNLAB_CHECK(depth <= kMaxDepth, ConfigError,
                "{}: the YAML tree nests deeper than {} levels at '{}' (an alias inside the value it names, like "
                "`a: &x [*x]`?)",
                loc.str(), kMaxDepth, path.empty() ? std::string("<top level>") : path.substr(0, 200) + "...");
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return Node::null(loc, path);
    case YAML::NodeType::Scalar: {
      const Location here = location_of(y.Mark(), file);
      require_utf8(y.Scalar(), here, path, "value");
      return Node::scalar(y.Scalar(), here, path);
    }
    case YAML::NodeType::Sequence: {
      Node out = Node::seq(loc, path);
      size_t i = 0;
      for (const auto& item : y) {
        const Location item_loc = location_of(item.Mark(), file);
        out.push_back(convert(item, file, item_loc, fmt::format("{}[{}]", path, i++), count, depth + 1));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      Node out = Node::map(loc, path);
      std::map<std::string, Location> seen;
      for (const auto& kv : y) {
        const Location key_loc = location_of(kv.first.Mark(), file);
        if (!kv.first.IsScalar()) {
          throw ConfigError(fmt::format("{}: map keys must be plain scalars at '{}'", key_loc.str(),
                                        path.empty() ? std::string("<top level>") : path));
        }
        const std::string key = kv.first.Scalar();
        const std::string p = key_path(path, key);
        require_utf8(key, key_loc, p, "key");
        if (auto it = seen.find(key); it != seen.end()) {
          throw ConfigError(fmt::format("{}: duplicate key '{}' at '{}' (first given at line {}, again at line {})",
                                        key_loc.str(), key, p, it->second.line, key_loc.line));
        }
        seen.emplace(key, key_loc);
        const Location value_loc = kv.second.IsScalar() ? location_of(kv.second.Mark(), file) : key_loc;
        out.set(key, convert(kv.second, file, value_loc, p, count, depth + 1));
      }
      return out;
    }
  }
  return Node();
}

/// One scalar or key, double-quoted where yaml-cpp's emitter would write it plain but its parser
/// would read something else back:
/// - a carriage return: written unquoted, a CR at the end of a line is read as part of the line
///   break ("a\r" came back as "a"); double-quoted, it is the escape "\r";
/// - a leading "---" or "...": a top-level key written plain at column 0 is read as a document
///   marker (the stored config no longer parsed).
void emit_scalar(YAML::Emitter& out, const std::string& text) {
  const bool marker = text.rfind("---", 0) == 0 || text.rfind("...", 0) == 0;
  if (marker || text.find('\r') != std::string::npos) out << YAML::DoubleQuoted;
  out << text;
}

void emit(YAML::Emitter& out, const Node& n) {
  switch (n.kind()) {
    case Node::Kind::Null:
      out << YAML::Null;
      break;
    case Node::Kind::Scalar:
      emit_scalar(out, n.str());
      break;
    case Node::Kind::Seq:
      out << YAML::BeginSeq;
      for (size_t i = 0; i < n.size(); ++i) emit(out, n[i]);
      out << YAML::EndSeq;
      break;
    case Node::Kind::Map:
      out << YAML::BeginMap;
      for (const auto& k : n.keys()) {
        out << YAML::Key;
        emit_scalar(out, k);
        out << YAML::Value;
        emit(out, *n.find(k));
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

namespace detail {

size_t bad_utf8_offset(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    auto cp = static_cast<char32_t>(len == 1 ? b0 : (b0 & (0x7Fu >> len)));
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return i;
    i += len;
  }
  return std::string::npos;
}

void relocate(Node& node, const Location& loc) {
  switch (node.kind()) {
    case Node::Kind::Null:
      node = Node::null(loc, node.path());
      break;
    case Node::Kind::Scalar:
      node = Node::scalar(node.str(), loc, node.path());
      break;
    case Node::Kind::Seq: {
      Node out = Node::seq(loc, node.path());
      for (size_t i = 0; i < node.size(); ++i) {
        Node item = node[i];
        relocate(item, loc);
        out.push_back(std::move(item));
      }
      node = std::move(out);
      break;
    }
    case Node::Kind::Map: {
      Node out = Node::map(loc, node.path());
      for (const auto& k : node.keys()) {
        Node child = *node.find(k);
        relocate(child, loc);
        out.set(k, std::move(child));
      }
      node = std::move(out);
      break;
    }
  }
}

}  // namespace detail

Node parse_yaml(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: YAML syntax error: {}", location_of(e.mark, file).str(), e.msg));
  }
  size_t count = 0;
  return convert(root, file, location_of(root.Mark(), file), "", count);
}

std::string to_yaml(const Node& node) {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, node);
  ATTNLAB_CHECK(out.good(), ConfigError, "{}: cannot emit YAML: {}", node.where(), out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace attnlab::config
