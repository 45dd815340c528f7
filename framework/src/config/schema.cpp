// Option schemas and their validation: unknown keys (with did-you-mean), required keys, types,
// choices and bounds, all reported at the file:line:col and YAML path of the offending value.
#include <fmt/format.h>

#include <algorithm>
#include <attnlab/config/schema.hpp>
#include <cmath>

#include "config/detail.hpp"

namespace attnlab::config {

namespace {

const Location kDefault{"<default>", 0, 0};

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string path_of(const Node& map, const std::string& key) {
  return map.path().empty() ? key : map.path() + "." + key;
}

}  // namespace

const char* type_name(Type t) {
  switch (t) {
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::Bool:
      return "bool";
    case Type::String:
      return "string";
    case Type::Map:
      return "map";
    case Type::List:
      return "list";
    case Type::Any:
      return "any";
  }
  return "unknown";
}

std::string yaml_scalar_text(const std::string& value) {
  std::string text = to_yaml(Node::scalar(value));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

OptionSpec opt_int(std::string name, std::optional<int64_t> def, std::string desc, std::optional<double> min,
                   std::optional<double> max) {
  std::optional<std::string> d;
  if (def) d = std::to_string(*def);
  return OptionSpec{std::move(name), Type::Int, std::move(d), std::move(desc), {}, min, max};
}

OptionSpec opt_float(std::string name, std::optional<double> def, std::string desc, std::optional<double> min,
                     std::optional<double> max) {
  std::optional<std::string> d;
  if (def) d = fmt::format("{}", *def);  // shortest text that reads back to the same double
  return OptionSpec{std::move(name), Type::Float, std::move(d), std::move(desc), {}, min, max};
}

OptionSpec opt_bool(std::string name, std::optional<bool> def, std::string desc) {
  std::optional<std::string> d;
  if (def) d = *def ? "true" : "false";
  return OptionSpec{std::move(name), Type::Bool, std::move(d), std::move(desc)};
}

OptionSpec opt_string(std::string name, std::optional<std::string> def, std::string desc) {
  std::optional<std::string> d;
  if (def) d = yaml_scalar_text(*def);  // quoted when needed ("", "null", "a: b")
  return OptionSpec{std::move(name), Type::String, std::move(d), std::move(desc)};
}

OptionSpec opt_enum(std::string name, std::string def, std::vector<std::string> choices, std::string desc) {
  return OptionSpec{std::move(name), Type::String, yaml_scalar_text(def), std::move(desc), std::move(choices)};
}

OptionSpec opt_node(std::string name, Type map_or_list, std::optional<std::string> def_yaml, std::string desc) {
  return OptionSpec{std::move(name), map_or_list, std::move(def_yaml), std::move(desc)};
}

Options::Options(const Node& node, const Schema& schema, std::string owner, std::vector<std::string> ignore)
    : schema_(schema), owner_(std::move(owner)) {
  ATTNLAB_CHECK(node.is_map() || node.is_null(), ConfigError, "{}: expected a map of options for {} {}, found {}",
                node.location().str(), owner_,
                node.path().empty() ? std::string("at the top level") : fmt::format("at '{}'", node.path()),
                detail::describe(node));
  std::vector<std::string> known;
  for (const auto& s : schema_) known.push_back(s.name);

  resolved_ = Node::map(node.location(), node.path());
  for (const auto& key : node.keys()) {
    const Node& value = *node.find(key);
    if (contains(ignore, key)) {
      resolved_.set(key, value);
      continue;
    }
    if (contains(known, key)) continue;
    std::string hint;
    if (auto near = did_you_mean(key, known)) hint = fmt::format("; did you mean '{}'?", *near);
    throw ConfigError(fmt::format("{}: unknown option '{}' for {} (at '{}'){} Known options: {}",
                                  value.location().str(), key, owner_, path_of(node, key), hint.empty() ? ";" : hint,
                                  known.empty() ? "(none)" : join(known, ", ")));
  }

  for (const auto& spec : schema_) {
    const Node* given = node.find(spec.name);
    Node value;
    if (given != nullptr) {
      value = *given;
      given_.push_back(spec.name);
    } else if (spec.default_value) {
      try {
        value = parse_yaml(*spec.default_value, "<default>");
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("<default>: {}: bad default for option '{}' (at '{}'): {}", owner_, spec.name,
                                      path_of(node, spec.name), e.what()));
      }
      detail::relocate(value, kDefault);
    } else {
      throw ConfigError(fmt::format("{}: missing required option '{}' for {} (at '{}'; {}{}{})", node.location().str(),
                                    spec.name, owner_, path_of(node, spec.name), type_name(spec.type),
                                    spec.description.empty() ? "" : ": ", spec.description));
    }
    Node& stored = resolved_.set(spec.name, std::move(value));

    auto bad = [&](const std::string& msg) {
      throw ConfigError(fmt::format("{}: {}: {}", stored.where(), owner_, msg));
    };
    auto check_bounds = [&](double x) {
      if (spec.min && x < *spec.min) bad(fmt::format("expected >= {}, found {}", *spec.min, stored.str()));
      if (spec.max && x > *spec.max) bad(fmt::format("expected <= {}, found {}", *spec.max, stored.str()));
    };
    if (spec.nullable && stored.is_null()) continue;
    const std::string found = detail::describe(stored);
    switch (spec.type) {
      case Type::Int: {
        if (!stored.is_scalar()) bad(fmt::format("expected an integer, found {}", found));
        int64_t x = 0;
        bool ok = true;
        try {
          x = stored.as_int();
        } catch (const ConfigError&) {
          ok = false;
        }
        if (!ok) bad(fmt::format("expected an integer, found {}", found));
        check_bounds(double(x));
        break;
      }
      case Type::Float: {
        if (!stored.is_scalar()) bad(fmt::format("expected a number, found {}", found));
        double x = 0;
        bool ok = true;
        try {
          x = stored.as_double();
        } catch (const ConfigError&) {
          ok = false;
        }
        if (!ok) bad(fmt::format("expected a number, found {}", found));
        if (!std::isfinite(x) && !spec.allow_non_finite) bad(fmt::format("expected a finite number, found {}", found));
        check_bounds(x);
        break;
      }
      case Type::Bool: {
        bool ok = stored.is_scalar();
        if (ok) {
          try {
            (void)stored.as_bool();
          } catch (const ConfigError&) {
            ok = false;
          }
        }
        if (!ok) bad(fmt::format("expected a boolean (true/false), found {}", found));
        break;
      }
      case Type::String:
        if (!stored.is_scalar()) bad(fmt::format("expected a string, found {}", found));
        if (!spec.choices.empty() && !contains(spec.choices, stored.str())) {
          std::string hint;
          if (auto near = did_you_mean(stored.str(), spec.choices)) hint = fmt::format(" (did you mean '{}'?)", *near);
          bad(fmt::format("expected one of {}, found {}{}", join(spec.choices, "|"), found, hint));
        }
        break;
      case Type::Map:
        if (!stored.is_map()) bad(fmt::format("expected a map, found {}", found));
        break;
      case Type::List:
        if (!stored.is_seq()) bad(fmt::format("expected a list, found {}", found));
        break;
      case Type::Any:
        break;
    }
  }
}

const OptionSpec& Options::spec(const std::string& name) const {
  for (const auto& s : schema_) {
    if (s.name == name) return s;
  }
  throw ConfigError(fmt::format("{}: {}: no option '{}' in its schema (a bug in {}'s code)", resolved_.where(), owner_,
                                name, owner_));
}

int64_t Options::get_int(const std::string& name) const {
  const OptionSpec& s = spec(name);
  ATTNLAB_CHECK(s.type == Type::Int || s.type == Type::Any, ConfigError,
                "{}: {}: option '{}' is of type {}, read as an int", resolved_.where(), owner_, name,
                type_name(s.type));
  return resolved_.at(name).as_int();
}

double Options::get_float(const std::string& name) const {
  const OptionSpec& s = spec(name);
  ATTNLAB_CHECK(s.type == Type::Float || s.type == Type::Int || s.type == Type::Any, ConfigError,
                "{}: {}: option '{}' is of type {}, read as a float", resolved_.where(), owner_, name,
                type_name(s.type));
  return resolved_.at(name).as_double();
}

bool Options::get_bool(const std::string& name) const {
  const OptionSpec& s = spec(name);
  ATTNLAB_CHECK(s.type == Type::Bool || s.type == Type::Any, ConfigError,
                "{}: {}: option '{}' is of type {}, read as a bool", resolved_.where(), owner_, name,
                type_name(s.type));
  return resolved_.at(name).as_bool();
}

std::string Options::get_string(const std::string& name) const {
  (void)spec(name);
  return resolved_.at(name).str();
}

const Node& Options::node(const std::string& name) const {
  (void)spec(name);
  return resolved_.at(name);
}

bool Options::given(const std::string& name) const { return contains(given_, name); }

void Options::record(const std::string& name, const std::string& value) const {
  spec(name);  // an option of the schema, else a logic error
  if (const Node* n = resolved_.find(name); n != nullptr && n->is_scalar() && n->str() == value) return;
  const Node* before = resolved_.find(name);
  const Location loc = before != nullptr ? before->location() : resolved_.location();
  resolved_.set(name, Node::scalar(value, loc, before != nullptr ? before->path() : path_of(resolved_, name)));
}

void Options::record(const std::string& name, Node value) const {
  spec(name);                              // an option of the schema, else a logic error
  resolved_.set(name, std::move(value));  // repathed below the plugin's map
}

void Options::fail(const std::string& name, const std::string& message) const {
  const Node* n = resolved_.find(name);
  const Location& loc = (n != nullptr && given(name)) ? n->location() : resolved_.location();
  const std::string path = n != nullptr ? n->path() : path_of(resolved_, name);
  throw ConfigError(fmt::format("{} (at '{}'): {}: {}", loc.str(), path, owner_, message));
}

}  // namespace attnlab::config
