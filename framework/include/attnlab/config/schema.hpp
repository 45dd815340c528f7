#pragma once
// Option schemas: what a plugin (or a framework section) accepts, with types, defaults and
// descriptions. `Options` validates a config map against a schema and gives typed access.
#include <attnlab/config/node.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::config {

enum class Type { Int, Float, Bool, String, Map, List, Any };
const char* type_name(Type t);  // "int", "float", "bool", "string", "map", "list", "any"

struct OptionSpec {
  std::string name;
  Type type = Type::String;
  /// Default as YAML text ("0.1", "true", "[1, 2]", "{}"); nullopt = required.
  std::optional<std::string> default_value;
  std::string description;
  /// For strings: allowed values (empty = any).
  std::vector<std::string> choices = {};
  /// For numbers: inclusive bounds (nullopt = unbounded).
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  /// For floats: whether .nan/.inf/-.inf are accepted (default: a float option is finite; NaN
  /// compares false with every bound, so without this check it would pass min/max).
  bool allow_non_finite = false;
  /// For numbers: whether null is accepted (an optional field: null = "not set", e.g. a transformer's
  /// attention_dropout, null = its dropout). A null skips the type and bound checks.
  bool nullable = false;
  /// For a map whose keys have options of their own (a transformer's `attention`): those, listed
  /// by `runner plugins` as <name>.<field>. Validated by whoever reads the map, not here.
  std::vector<OptionSpec> fields = {};
};

using Schema = std::vector<OptionSpec>;

/// A string as the YAML text of a default: quoted when YAML would read it as something else ("",
/// "null", "a: b"), with no line break after it.
std::string yaml_scalar_text(const std::string& value);

// Helpers to write schemas compactly:
//   {opt_int("num_hiddens", 256, "model width", 1), opt_enum("norm", "last", {"first","last"}, "...")}
OptionSpec opt_int(std::string name, std::optional<int64_t> def, std::string desc,
                   std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
OptionSpec opt_float(std::string name, std::optional<double> def, std::string desc,
                     std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
OptionSpec opt_bool(std::string name, std::optional<bool> def, std::string desc);
OptionSpec opt_string(std::string name, std::optional<std::string> def, std::string desc);
OptionSpec opt_enum(std::string name, std::string def, std::vector<std::string> choices, std::string desc);
/// A nested map or list passed through unvalidated here (validated by whoever consumes it).
OptionSpec opt_node(std::string name, Type map_or_list, std::optional<std::string> def_yaml, std::string desc);

/// A validated view of a config map.
/// Construction checks: node is a map (or null = all defaults); no unknown keys (ConfigError with
/// location, YAML path, owner and "did you mean"); every required key present; each value parses
/// as its type and respects choices/min/max; a float is finite unless its spec allows otherwise. `ignore` lists keys
/// consumed by someone else (e.g. "plugin") that are allowed but not part of the schema.
class Options {
 public:
  Options(const Node& node, const Schema& schema, std::string owner, std::vector<std::string> ignore = {"plugin"});

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  /// The node (given or default) for a Map/List/Any option.
  const Node& node(const std::string& name) const;
  /// True when the user gave the key (not a default).
  bool given(const std::string& name) const;

  /// Throw a ConfigError about option `name` at its place (e.g. "4 heads do not divide 255").
  [[noreturn]] void fail(const std::string& name, const std::string& message) const;

  /// The resolved map (user values + defaults), for recording in results.
  const Node& resolved() const { return resolved_; }
  /// Records that the plugin used `value` for option `name` instead of the default, because it
  /// learned the value elsewhere (a pretrained model's shape from its config.json), so that the
  /// results file's /config says what ran and rebuilding from it makes the same model. An option
  /// the user gave keeps its place in messages.
  void record(const std::string& name, const std::string& value) const;
  /// The same for a map or list value (a pretrained Llama's attention: {scorer: {plugin: rope, base: ...}}),
  /// placed at the option's path; o.node(name) returns it from then on.
  void record(const std::string& name, Node value) const;
  const std::string& owner() const { return owner_; }

 private:
  const OptionSpec& spec(const std::string& name) const;
  mutable Node resolved_;  // record() completes it while the plugin is made
  Schema schema_;
  std::string owner_;
  std::vector<std::string> given_;
};

}  // namespace attnlab::config
