#pragma once
// Properties of a config tree that both config targets check after a successful load/override:
// - the tree is consistent: every map key finds its own child, every child's YAML path is its
//   parent's path plus its key or [index] (error messages name places by these paths);
// - the resolved YAML round-trips: `runner` stores to_yaml(config) in the results file and
//   `runner eval` / `runner compare` parse it back, so what to_yaml writes must parse into the
//   same tree (same kinds, keys in order, scalar texts).
#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>

#include <string>

#include "common.hpp"

namespace fuzz {

inline void check_consistent(const attnlab::config::Node& n, const std::string& path) {
  using attnlab::config::Node;
  if (n.path() != path) fail("node at '" + path + "' says its path is '" + n.path() + "'");
  if (n.is_map()) {
    if (n.keys().size() != n.size()) fail("map at '" + path + "': keys and children differ in number");
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string& k = n.keys()[i];
      if (n.find(k) != &n[i]) fail("map at '" + path + "': key '" + k + "' does not find its own child");
      check_consistent(n[i], path.empty() ? k : path + "." + k);
    }
  } else if (n.is_seq()) {
    for (size_t i = 0; i < n.size(); ++i) check_consistent(n[i], path + "[" + std::to_string(i) + "]");
  }
}

inline void check_same(const attnlab::config::Node& a, const attnlab::config::Node& b, const std::string& where,
                       const std::string& text) {
  auto fail = [&](const std::string& what) { fuzz::fail(what + "\n--- to_yaml wrote ---\n" + text.substr(0, 4000)); };
  if (a.kind() != b.kind()) fail("round trip changed the kind of the value at '" + where + "'");
  if (a.is_scalar() && a.str() != b.str())
    fail("round trip changed the scalar at '" + where + "' from '" + a.str() + "' to '" + b.str() + "'");
  if (a.size() != b.size()) fail("round trip changed the size of '" + where + "'");
  if (a.is_map() && a.keys() != b.keys()) fail("round trip changed the keys of '" + where + "'");
  for (size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i], where + "/" + std::to_string(i), text);
}

/// Both properties; to_yaml may refuse a tree (ConfigError "cannot emit YAML"), which is a clear
/// error, but text it did write must parse back.
inline void check_tree(const attnlab::config::Node& root) {
  check_consistent(root, root.path());
  std::string text;
  try {
    text = attnlab::config::to_yaml(root);
  } catch (const attnlab::ConfigError&) {
    return;
  }
  attnlab::config::Node back;
  try {
    back = attnlab::config::parse_yaml(text, "<round trip>");
  } catch (const attnlab::Error& e) {
    fail(std::string("to_yaml wrote text that parse_yaml refuses: ") + e.what() + "\n--- text ---\n" + text);
  }
  check_same(root, back, "<root>", text);
}

}  // namespace fuzz
