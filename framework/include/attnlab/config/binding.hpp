#pragma once
// Options declared once: each schema entry bound to a field of a plugin's options struct.
//
//   struct AdditiveOptions {
//     int64_t num_hiddens = 0;  // the default is the struct's
//   };
//   const config::Binding<AdditiveOptions>& binding() {
//     static const auto b = config::Binding<AdditiveOptions>().option(
//         "num_hiddens", &AdditiveOptions::num_hiddens, "width of the tanh layer", {.min = 0, .max = 65536});
//     return b;
//   }
//   config::Schema schema() { return binding().schema(); }           // what the registry validates
//   ... make(const config::Options& o, ...) { const AdditiveOptions opts = binding().read(o); ... }
//
// The name is written once, in the binding; the type comes from the field's type (an integer
// field is an int option, bounded to what the field can hold; floating point a float, and
// std::optional<floating point or integer> a float or int that may be null; bool a bool; std::string a string;
// config::Node a map, list or any), and the default from the struct's initializer (or from the
// defaults the binding was made with); `required(...)` declares one without a default. Code reads
// fields, so a mistyped option name cannot exist past compilation. `fail(o, &T::field, msg)`
// reports a cross-field error (num_heads not dividing num_hiddens) at the field's YAML place.
#include <attnlab/config/node.hpp>
#include <attnlab/config/schema.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attnlab::config {

/// Bounds of a number option (inclusive); a float option is finite unless allow_non_finite.
struct Bounds {
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  bool allow_non_finite = false;
};

template <class V>
struct is_optional_float : std::false_type {};
template <class U>
struct is_optional_float<std::optional<U>> : std::is_floating_point<U> {};
template <class V>
struct is_optional_int : std::false_type {};
template <class U>
struct is_optional_int<std::optional<U>> : std::bool_constant<std::is_integral_v<U> && !std::is_same_v<U, bool>> {};

template <class T>
class Binding {
 public:
  /// Defaults are `defaults`' fields: T{} unless a plugin shares a struct with other defaults.
  explicit Binding(T defaults = T{}) : defaults_(std::move(defaults)) {}

  /// A number, bool or string option stored in `field` (a field of T or of a base of T).
  template <class V, class C>
  Binding& option(std::string name, V C::*field, std::string description,
                  Bounds bounds = {}) requires std::is_base_of_v<C, T> {
    const V& def = static_cast<const C&>(defaults_).*field;
    OptionSpec spec{std::move(name), Type::Any, std::nullopt, std::move(description)};
    if constexpr (std::is_same_v<V, bool>) {
      spec.type = Type::Bool;
      spec.default_value = def ? "true" : "false";
      add(std::move(spec), field, [](const Options& o, const std::string& n) { return o.get_bool(n); });
    } else if constexpr (std::is_integral_v<V>) {
      spec.type = Type::Int;
      // Never wider than the field: a value it cannot hold is refused, not wrapped.
      spec.min = bounds.min;
      spec.max = bounds.max;
      if constexpr (!(std::is_signed_v<V> && sizeof(V) >= sizeof(int64_t))) {
        constexpr double lo = static_cast<double>(std::numeric_limits<V>::min());
        constexpr double hi = static_cast<double>(std::numeric_limits<V>::max());
        spec.min = spec.min ? std::max(*spec.min, lo) : lo;
        spec.max = spec.max ? std::min(*spec.max, hi) : hi;
      }
      spec.default_value = std::to_string(def);
      add(std::move(spec), field, [](const Options& o, const std::string& n) { return static_cast<V>(o.get_int(n)); });
    } else if constexpr (std::is_floating_point_v<V>) {
      spec.type = Type::Float;
      spec.min = bounds.min;
      spec.max = bounds.max;
      spec.allow_non_finite = bounds.allow_non_finite;
      spec.default_value = fmt::format("{}", def);  // shortest text that reads back to the same value
      add(std::move(spec), field,
          [](const Options& o, const std::string& n) { return static_cast<V>(o.get_float(n)); });
    } else if constexpr (std::is_same_v<V, std::string>) {
      spec.type = Type::String;
      spec.default_value = yaml_scalar_text(def);
      add(std::move(spec), field, [](const Options& o, const std::string& n) { return o.get_string(n); });
    } else if constexpr (is_optional_float<V>::value) {
      // null (the default when the field's is nullopt) = not set; the plugin decides what that means.
      using U = typename V::value_type;
      spec.type = Type::Float;
      spec.nullable = true;
      spec.min = bounds.min;
      spec.max = bounds.max;
      spec.allow_non_finite = bounds.allow_non_finite;
      spec.default_value = def ? fmt::format("{}", *def) : std::string("null");
      add(std::move(spec), field, [](const Options& o, const std::string& n) -> V {
        if (o.node(n).is_null()) return std::nullopt;
        return static_cast<U>(o.get_float(n));
      });
    } else if constexpr (is_optional_int<V>::value) {
      // null (the default when the field's is nullopt) = not set; the plugin decides what that means.
      using U = typename V::value_type;
      spec.type = Type::Int;
      spec.nullable = true;
      spec.min = bounds.min;
      spec.max = bounds.max;
      spec.default_value = def ? std::to_string(*def) : std::string("null");
      add(std::move(spec), field, [](const Options& o, const std::string& n) -> V {
        if (o.node(n).is_null()) return std::nullopt;
        return static_cast<U>(o.get_int(n));
      });
    } else {
      static_assert(sizeof(V) == 0, "Binding::option: a field of another type needs choice() or node()");
    }
    return *this;
  }

  /// An option the user must give (no default; `runner plugins` shows "(required)"), stored in
  /// `field`: a number, bool or string field, as option() takes.
  template <class V, class C>
  Binding& required(std::string name, V C::*field, std::string description,
                    Bounds bounds = {}) requires std::is_base_of_v<C, T> {
    option(std::move(name), field, std::move(description), bounds);
    entries_.back().spec.default_value = std::nullopt;
    return *this;
  }

  /// A string option with fixed choices, stored in `field` as the value each choice maps to (an
  /// enum, a bool). The default is the choice whose value the defaults hold.
  template <class V, class C>
  Binding& choice(std::string name, V C::*field, std::vector<std::pair<std::string, V>> choices,
                  std::string description) requires(std::is_base_of_v<C, T> && !std::is_same_v<V, std::string>) {
    add_choice(std::move(name), field, std::move(choices), std::move(description));
    return *this;
  }

  /// The same for a string field whose value is the choice itself.
  template <class C>
  Binding& choice(std::string name, std::string C::*field, std::vector<std::string> choices,
                  std::string description) requires std::is_base_of_v<C, T> {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (auto& c : choices) pairs.emplace_back(c, c);
    add_choice(std::move(name), field, std::move(pairs), std::move(description));
    return *this;
  }

  /// A map, list or any YAML value handed on as a Node (validated by whoever reads it); the
  /// default is YAML text, since a Node has no place of its own (std::nullopt: required).
  template <class C>
  Binding& node(std::string name, Node C::*field, Type type, std::optional<std::string> default_yaml,
                std::string description) requires std::is_base_of_v<C, T> {
    OptionSpec spec{std::move(name), type, std::move(default_yaml), std::move(description)};
    add(std::move(spec), field, [](const Options& o, const std::string& n) { return o.node(n); });
    return *this;
  }

  /// An option not held by the struct, read from the Options by a framework helper (the
  /// `attention` map, read by nn::registry_scorer_factory). Listed and validated like the others.
  Binding& unbound(OptionSpec spec) {
    entries_.push_back({std::move(spec), nullptr, nullptr});
    return *this;
  }

  /// Every option of `base`, a binding of a base struct of T (shared options: a transformer's).
  template <class Base>
  Binding& include(const Binding<Base>& base) requires std::is_base_of_v<Base, T> {
    for (const auto& e : base.entries_) {
      Entry mine{e.spec, nullptr, nullptr};
      if (e.set) {
        mine.set = [set = e.set](const Options& o, T& t) { set(o, static_cast<Base&>(t)); };
        mine.address = [address = e.address](const T& t) { return address(static_cast<const Base&>(t)); };
      }
      entries_.push_back(std::move(mine));
    }
    return *this;
  }

  /// The schema the registry validates a plugin's map against (and `runner plugins` lists).
  Schema schema() const {
    Schema s;
    for (const auto& e : entries_) s.push_back(e.spec);
    return s;
  }

  /// The struct from validated options: the defaults, each bound field set from its option.
  T read(const Options& o) const {
    T t = defaults_;
    for (const auto& e : entries_) {
      if (e.set) e.set(o, t);
    }
    return t;
  }

  /// The option name bound to `field`, a field of T or of a base included (std::logic_error when
  /// no option is bound to it).
  template <class V, class C>
  const std::string& name_of(V C::*field) const requires std::is_base_of_v<C, T> {
    const void* wanted = &(static_cast<const C&>(defaults_).*field);
    for (const auto& e : entries_) {
      if (e.address && e.address(defaults_) == wanted) return e.spec.name;
    }
    throw std::logic_error("config::Binding: no option is bound to that field");
  }

  /// A ConfigError about the option bound to `field`, at its YAML place (Options::fail).
  template <class V, class C>
  [[noreturn]] void fail(const Options& o, V C::*field,
                         const std::string& message) const requires std::is_base_of_v<C, T> {
    o.fail(name_of(field), message);
  }

 private:
  template <class>
  friend class Binding;

  struct Entry {
    OptionSpec spec;
    std::function<void(const Options&, T&)> set;
    std::function<const void*(const T&)> address;
  };

  template <class V, class C>
  void add_choice(std::string name, V C::*field, std::vector<std::pair<std::string, V>> choices,
                  std::string description) {
    OptionSpec spec{std::move(name), Type::String, std::nullopt, std::move(description)};
    for (const auto& [text, value] : choices) {
      spec.choices.push_back(text);
      if (!spec.default_value && value == static_cast<const C&>(defaults_).*field) {
        spec.default_value = yaml_scalar_text(text);
      }
    }
    if (!spec.default_value) {
      throw std::logic_error("config::Binding: the default of option '" + spec.name + "' is none of its choices");
    }
    add(std::move(spec), field, [choices](const Options& o, const std::string& n) {
      const std::string given = o.get_string(n);
      for (const auto& [text, value] : choices) {
        if (text == given) return value;
      }
      return choices.front().second;  // unreachable: Options checked the choice
    });
  }

  template <class V, class C, class Read>
  void add(OptionSpec spec, V C::*field, Read read) {
    for (const auto& e : entries_) {
      if (e.spec.name == spec.name) throw std::logic_error("config::Binding: option '" + spec.name + "' bound twice");
    }
    const std::string name = spec.name;
    entries_.push_back({std::move(spec),
                        [field, read, name](const Options& o, T& t) { static_cast<C&>(t).*field = read(o, name); },
                        [field](const T& t) -> const void* { return &(static_cast<const C&>(t).*field); }});
  }

  T defaults_;
  std::vector<Entry> entries_;
};

}  // namespace attnlab::config
