#pragma once
// A YAML tree that remembers where every value came from (file:line:col) and its YAML path,
// so every config error can name the place. Built from yaml-cpp; merged for includes/overrides.
#include <attnlab/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::config {

struct Location {
  std::string file;  // "" for values from the command line or defaults
  int line = 0;      // 1-based; 0 when unknown
  int col = 0;       // 1-based
  /// "file:line:col" (or "<command line>" / "<default>").
  std::string str() const;
};

class Node {
 public:
  enum class Kind { Null, Scalar, Map, Seq };

  Node() = default;
  /// A null that remembers where it was written (e.g. `key:` with no value).
  static Node null(Location loc, std::string path = {});
  static Node scalar(std::string value, Location loc = {}, std::string path = {});
  static Node map(Location loc = {}, std::string path = {});
  static Node seq(Location loc = {}, std::string path = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_scalar() const { return kind_ == Kind::Scalar; }
  bool is_map() const { return kind_ == Kind::Map; }
  bool is_seq() const { return kind_ == Kind::Seq; }
  const Location& location() const { return loc_; }
  /// YAML path from the root, e.g. "model.encoder.num_hiddens" or "samples[2].src"; "" = root.
  const std::string& path() const { return path_; }
  /// "<file:line:col> (at 'path')" for messages.
  std::string where() const;

  // --- scalars (throw ConfigError naming the place, expected vs found) ---
  const std::string& str() const;  // raw scalar text
  int64_t as_int() const;
  double as_double() const;
  bool as_bool() const;  // true/false/yes/no/on/off

  // --- maps (insertion order kept) ---
  bool has(const std::string& key) const;
  const Node& at(const std::string& key) const;  // ConfigError "missing key" naming the map's place
  const Node* find(const std::string& key) const;
  Node* find(const std::string& key);
  /// Insert or replace; the child's path is set from this node's path.
  Node& set(const std::string& key, Node value);
  bool erase(const std::string& key);
  const std::vector<std::string>& keys() const { return keys_; }

  // --- sequences ---
  size_t size() const;  // map or seq size
  const Node& operator[](size_t i) const;
  Node& push_back(Node value);

  /// Deep merge: maps merge recursively, everything else is replaced by `over`.
  void merge(const Node& over);
  /// Re-derive every descendant's path from this node's path (after moves/merges).
  void repath(const std::string& path);

 private:
  Kind kind_ = Kind::Null;
  std::string scalar_;
  std::vector<std::string> keys_;  // map keys, parallel to children_
  std::vector<Node> children_;     // map values or seq items
  /// Map key -> index in keys_/children_, so lookups stay O(1) in maps of any size (a file with
  /// 700k keys was minutes of linear searches).
  std::unordered_map<std::string, size_t> index_;
  Location loc_;
  std::string path_;
};

/// The most values (scalars, maps, lists, nulls) a parsed YAML tree may hold, aliases expanded.
inline constexpr size_t kMaxConfigNodes = 100000;

/// Parse YAML text (file is only used for locations). A tree over kMaxConfigNodes values is a
/// ConfigError, and so is one nested deeper than 1000 levels, which only an alias inside the value
/// it names reaches: yaml-cpp 0.7 itself refuses a document nested deeper than 498 collections
/// (a ConfigError at its first line, "bad file"; tests/config_test.cpp checks both numbers).
Node parse_yaml(const std::string& text, const std::string& file);
/// Emit as YAML text (block style, keys in order).
std::string to_yaml(const Node& node);

/// Closest candidate by edit distance, if close enough to suggest ("did you mean 'x'?").
std::optional<std::string> did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace attnlab::config
