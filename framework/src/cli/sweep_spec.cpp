#include "cli/sweep_spec.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

namespace attnlab::cli::sweep {
namespace {
namespace fs = std::filesystem;

/// The most runs one sweep may expand to: a typo such as range(0,1000000000) is an error, not
/// an exhausted memory.
constexpr size_t kMaxRuns = 100000;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

/// `text` split at commas outside quotes and brackets; ConfigError on unbalanced ones.
std::vector<std::string> top_level_items(const std::string& key, const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::vector<char> closers;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '{' || c == '(') {
      closers.push_back(c == '[' ? ']' : c == '{' ? '}' : ')');
    } else if (!closers.empty() && c == closers.back()) {
      closers.pop_back();
    } else if (c == ',' && closers.empty()) {
      items.push_back(trim(item));
      item.clear();
      continue;
    }
    item += c;
  }
  ATTNLAB_CHECK(!quote && closers.empty(), ConfigError, "sweep: '{}={}': unclosed {}", key, text,
                quote ? fmt::format("quote {}", quote) : fmt::format("bracket (expected '{}')", closers.back()));
  items.push_back(trim(item));
  return items;
}

int64_t range_int(const std::string& key, const std::string& item, const std::string& text) {
  const auto t = trim(text);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  ATTNLAB_CHECK(ec == std::errc() && end == t.data() + t.size() && !t.empty(), ConfigError,
                "sweep: axis '{}': {}: '{}' is not an integer (range(start, stop[, step]) takes integers)", key, item,
                t);
  return v;
}

bool is_range(const std::string& item) { return item.rfind("range(", 0) == 0; }

/// range(a,b[,step]) -> its values as text.
std::vector<std::string> expand_range(const std::string& key, const std::string& item) {
  ATTNLAB_CHECK(item.back() == ')', ConfigError, "sweep: axis '{}': malformed '{}': expected range(start, stop[, step])",
                key, item);
  std::vector<std::string> args;
  std::stringstream in(item.substr(6, item.size() - 7));
  for (std::string a; std::getline(in, a, ',');) args.push_back(a);
  ATTNLAB_CHECK(args.size() == 2 || args.size() == 3, ConfigError,
                "sweep: axis '{}': '{}' has {} arguments; expected range(start, stop[, step])", key, item, args.size());
  const int64_t start = range_int(key, item, args[0]), stop = range_int(key, item, args[1]);
  const int64_t step = args.size() == 3 ? range_int(key, item, args[2]) : 1;
  ATTNLAB_CHECK(step != 0, ConfigError, "sweep: axis '{}': '{}' has step 0", key, item);
  std::vector<std::string> out;
  for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
    ATTNLAB_CHECK(out.size() < kMaxRuns, ConfigError, "sweep: axis '{}': '{}' has more than {} values", key, item,
                  kMaxRuns);
    out.push_back(std::to_string(v));
  }
  ATTNLAB_CHECK(!out.empty(), ConfigError, "sweep: axis '{}': '{}' is empty (no value from {} to {} by {})", key, item,
                start, stop, step);
  return out;
}

/// The values of one axis: no empty item, no value twice.
void check_values(const std::string& key, const std::vector<std::string>& values) {
  ATTNLAB_CHECK(!values.empty(), ConfigError, "sweep: axis '{}' has no values", key);
  std::set<std::string> seen;
  for (const auto& v : values) {
    ATTNLAB_CHECK(seen.insert(v).second, ConfigError, "sweep: axis '{}' has the value '{}' twice", key, v);
  }
}

YAML::Node to_yaml_cpp(const config::Node& node) {
  YAML::Node out;
  switch (node.kind()) {
    case config::Node::Kind::Null: break;
    case config::Node::Kind::Scalar: out = node.str(); break;
    case config::Node::Kind::Map:
      out = YAML::Node(YAML::NodeType::Map);
      for (const auto& k : node.keys()) out[k] = to_yaml_cpp(node.at(k));
      break;
    case config::Node::Kind::Seq:
      out = YAML::Node(YAML::NodeType::Sequence);
      for (size_t i = 0; i < node.size(); ++i) out.push_back(to_yaml_cpp(node[i]));
      break;
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ATTNLAB_CHECK(in.good(), ConfigError, "sweep: cannot read '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string key_of(const std::string& assignment) { return trim(assignment.substr(0, assignment.find('='))); }

std::string flow_yaml(const config::Node& node) {
  if (node.is_scalar()) return node.str();
  YAML::Emitter e;
  e << YAML::Flow << to_yaml_cpp(node);
  return e.c_str();
}

std::vector<std::string> split_values(const std::string& key, const std::string& text) {
  std::vector<std::string> values;
  for (const auto& item : top_level_items(key, text)) {
    ATTNLAB_CHECK(!item.empty(), ConfigError,
                  "sweep: axis '{}={}' has an empty value (quote a value that holds a comma: {}='a,b')", key, text, key);
    if (is_range(item)) {
      auto r = expand_range(key, item);
      values.insert(values.end(), r.begin(), r.end());
    } else {
      values.push_back(item);
    }
  }
  check_values(key, values);
  return values;
}

void add_arguments(Spec& spec, const std::vector<std::string>& args) {
  for (const auto& a : args) {
    const auto eq = a.find('=');
    ATTNLAB_CHECK(eq != std::string::npos && !key_of(a).empty(), ConfigError,
                  "sweep: '{}' is not key=value (e.g. model.norm=first,last or seed=range(0,10))", a);
    const auto key = key_of(a), text = a.substr(eq + 1);
    const auto items = top_level_items(key, text);
    if (items.size() == 1 && !is_range(items[0])) {
      spec.overrides.push_back(a);
    } else {
      spec.axes.push_back({key, split_values(key, text)});
    }
  }
  check_keys(spec);
}

void check_keys(const Spec& spec) {
  std::vector<std::string> keys;
  for (const auto& axis : spec.axes) keys.push_back(axis.key);
  for (const auto& o : spec.overrides) keys.push_back(key_of(o));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const auto& a = keys[i].size() < keys[j].size() ? keys[i] : keys[j];
      const auto& b = keys[i].size() < keys[j].size() ? keys[j] : keys[i];
      ATTNLAB_CHECK(a != b, ConfigError, "sweep: '{}' is given twice (as an axis or an override)", a);
      const bool inside = b.rfind(a, 0) == 0 && (b[a.size()] == '.' || b[a.size()] == '[');
      ATTNLAB_CHECK(!inside, ConfigError, "sweep: '{}' and '{}' conflict: the second lies inside the first", a, b);
    }
  }
}

bool is_sweep_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > (4u << 20)) return false;
  try {
    const auto root = config::parse_yaml(read_text(path), path);
    return root.is_map() && root.has("sweep");
  } catch (const ConfigError&) {
    return false;
  }
}

namespace {

/// A sweep file's `sweep:` block, each option declared once.
struct SweepBlock {
  std::string experiment;  // required
  config::Node axes, overrides;
  std::string output;
};

const config::Binding<SweepBlock>& sweep_block_binding() {
  using B = SweepBlock;
  static const auto b =
      config::Binding<B>()
          .required("experiment", &B::experiment, "experiment file, relative to the sweep file")
          .node("axes", &B::axes, config::Type::Map, "{}", "key: [values] or key: 'a,b' / 'range(0,10)'")
          .node("overrides", &B::overrides, config::Type::Any, "[]", "plain overrides: [k=v, ...] or {k: v}")
          .option("output", &B::output, "the sweep folder");
  return b;
}

}  // namespace

Spec read_sweep_file(const std::string& path) {
  const auto root = config::parse_yaml(read_text(path), path);
  ATTNLAB_CHECK(root.is_map() && root.has("sweep"), ConfigError, "{}: not a sweep file (no 'sweep:' block)", path);
  const auto& block = sweep_block_binding();
  const SweepBlock given = block.read(config::Options(root.at("sweep"), block.schema(), "the sweep block", {}));
  Spec spec;
  fs::path exp = given.experiment;
  spec.experiment = exp.is_absolute() ? exp.string() : (fs::path(path).parent_path() / exp).lexically_normal().string();
  spec.output = given.output;
  const auto& axes = given.axes;
  for (const auto& key : axes.keys()) {
    const auto& v = axes.at(key);
    Axis axis{key, {}};
    if (v.is_seq()) {
      for (size_t i = 0; i < v.size(); ++i) axis.values.push_back(flow_yaml(v[i]));
      check_values(key, axis.values);
    } else {
      ATTNLAB_CHECK(v.is_scalar(), ConfigError, "{}: axis '{}': expected a list of values or a string such as 'a,b'",
                    v.where(), key);
      axis.values = split_values(key, v.str());
    }
    spec.axes.push_back(std::move(axis));
  }
  const auto& o = given.overrides;
  if (o.is_map()) {
    for (const auto& key : o.keys()) spec.overrides.push_back(key + "=" + flow_yaml(o.at(key)));
  } else if (o.is_seq()) {
    for (size_t i = 0; i < o.size(); ++i) {
      ATTNLAB_CHECK(o[i].is_scalar() && o[i].str().find('=') != std::string::npos, ConfigError,
                    "{}: expected 'key=value'", o[i].where());
      spec.overrides.push_back(o[i].str());
    }
  } else {
    ATTNLAB_CHECK(o.is_null(), ConfigError, "{}: overrides: expected a list of key=value or a map", o.where());
  }
  check_keys(spec);
  return spec;
}

std::string file_stem(const std::vector<std::string>& overrides) {
  if (overrides.empty()) return "run";
  std::string out;
  for (const auto& o : overrides) {
    if (!out.empty()) out += '_';
    for (unsigned char c : o) {
      const bool keep = c < 0x80 && (std::isalnum(c) || c == '.' || c == '_' || c == '=' || c == '+' || c == '-');
      out += keep ? static_cast<char>(c) : '_';
    }
  }
  if (out.front() == '.') out.front() = '_';
  if (out.size() > 200) {
    std::string whole;
    for (const auto& o : overrides) whole += o + '\n';
    out = fmt::format("{}-{:08x}", out.substr(0, 191), std::hash<std::string>{}(whole) & 0xffffffffu);
  }
  return out;
}

std::vector<RunSpec> expand(const Spec& spec) {
  size_t total = 1;
  for (const auto& axis : spec.axes) {
    check_values(axis.key, axis.values);
    total *= axis.values.size();
    ATTNLAB_CHECK(total <= kMaxRuns, ConfigError, "sweep: the axes expand to more than {} runs", kMaxRuns);
  }
  std::vector<RunSpec> runs;
  std::set<std::string> names;
  for (size_t i = 0; i < total; ++i) {
    RunSpec r;
    size_t rest = i;
    for (size_t a = spec.axes.size(); a-- > 0;) {
      const auto& axis = spec.axes[a];
      r.overrides.insert(r.overrides.begin(), axis.key + "=" + axis.values[rest % axis.values.size()]);
      rest /= axis.values.size();
    }
    const auto stem = file_stem(r.overrides);
    r.name = stem;
    for (int n = 2; !names.insert(r.name).second; ++n) r.name = fmt::format("{}-{}", stem, n);
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace attnlab::cli::sweep
