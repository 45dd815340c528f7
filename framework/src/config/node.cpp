// The located YAML tree: scalar conversions with located errors, map/seq editing, deep merge.
#include <fmt/format.h>

#include <algorithm>
#include <attnlab/config/node.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "config/detail.hpp"

namespace attnlab::config {

namespace {

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, size_t i) { return fmt::format("{}[{}]", parent, i); }

std::string at_path(const std::string& path) {
  return path.empty() ? std::string("at the top level") : fmt::format("at '{}'", path);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

namespace detail {

std::string describe(const Node& n) {
  switch (n.kind()) {
    case Node::Kind::Null:
      return "null";
    case Node::Kind::Map:
      return "a map";
    case Node::Kind::Seq:
      return "a list";
    case Node::Kind::Scalar:
      break;
  }
  // A message is one line: a long scalar (a whole file read as one, e.g. /proc/kallsyms) is cut,
  // at a character boundary.
  constexpr size_t kShown = 100;
  const std::string& s = n.str();
  if (s.size() <= kShown) return fmt::format("'{}'", s);
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("'{}...' ({} bytes)", s.substr(0, cut), s.size());
}

}  // namespace detail

using detail::describe;

std::string Location::str() const {
  if (file.empty()) return "<default>";
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, col);
}

Node Node::null(Location loc, std::string path) {
  Node n;
  n.loc_ = std::move(loc);
  n.path_ = std::move(path);
  return n;
}

Node Node::scalar(std::string value, Location loc, std::string path) {
  Node n;
  n.kind_ = Kind::Scalar;
  n.scalar_ = std::move(value);
  n.loc_ = std::move(loc);
  n.path_ = std::move(path);
  return n;
}

Node Node::map(Location loc, std::string path) {
  Node n;
  n.kind_ = Kind::Map;
  n.loc_ = std::move(loc);
  n.path_ = std::move(path);
  return n;
}

Node Node::seq(Location loc, std::string path) {
  Node n;
  n.kind_ = Kind::Seq;
  n.loc_ = std::move(loc);
  n.path_ = std::move(path);
  return n;
}

std::string Node::where() const {
  if (path_.empty()) return loc_.str();
  return fmt::format("{} (at '{}')", loc_.str(), path_);
}

const std::string& Node::str() const {
  ATTNLAB_CHECK(is_scalar(), ConfigError, "{}: expected a scalar {}, found {}", loc_.str(), at_path(path_),
                describe(*this));
  return scalar_;
}

int64_t Node::as_int() const {
  const std::string& s = str();
  std::string_view v = s;
  bool negative = false;
  if (!v.empty() && (v.front() == '+' || v.front() == '-')) {
    negative = v.front() == '-';
    v.remove_prefix(1);
  }
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    base = 16;
    v.remove_prefix(2);
  } else if (v.size() > 2 && v[0] == '0' && v[1] == 'o') {
    base = 8;
    v.remove_prefix(2);
  }
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), magnitude, base);
  const bool whole = !v.empty() && end == v.data() + v.size();
  ATTNLAB_CHECK(whole && ec != std::errc::invalid_argument, ConfigError, "{}: expected an integer {}, found {}",
                loc_.str(), at_path(path_), describe(*this));
  const uint64_t limit =
      negative ? uint64_t(std::numeric_limits<int64_t>::max()) + 1 : uint64_t(std::numeric_limits<int64_t>::max());
  ATTNLAB_CHECK(ec == std::errc() && magnitude <= limit, ConfigError,
                "{}: expected a 64-bit integer {}, found {} (out of range)", loc_.str(), at_path(path_),
                describe(*this));
  return negative ? int64_t(0 - magnitude) : int64_t(magnitude);
}

double Node::as_double() const {
  const std::string& s = str();
  const std::string l = lower(s);
  if (l == ".inf" || l == "+.inf") return std::numeric_limits<double>::infinity();
  if (l == "-.inf") return -std::numeric_limits<double>::infinity();
  if (l == ".nan") return std::numeric_limits<double>::quiet_NaN();
  std::string_view v = s;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  const bool parsed = !v.empty() && ec == std::errc() && end == v.data() + v.size();
  ATTNLAB_CHECK(parsed, ConfigError, "{}: expected a number {}, found {}", loc_.str(), at_path(path_), describe(*this));
  return value;
}

bool Node::as_bool() const {
  const std::string l = lower(str());
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  throw ConfigError(fmt::format("{}: expected a boolean (true/false/yes/no/on/off) {}, found {}", loc_.str(),
                                at_path(path_), describe(*this)));
}

bool Node::has(const std::string& key) const { return find(key) != nullptr; }

const Node* Node::find(const std::string& key) const {
  if (!is_map()) return nullptr;
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &children_[it->second];
}

Node* Node::find(const std::string& key) { return const_cast<Node*>(static_cast<const Node&>(*this).find(key)); }

const Node& Node::at(const std::string& key) const {
  ATTNLAB_CHECK(is_map(), ConfigError, "{}: expected a map {} (looking up key '{}'), found {}", loc_.str(),
                at_path(path_), key, describe(*this));
  if (const Node* n = find(key)) return *n;
  std::string hint;
  if (auto near = did_you_mean(key, keys_)) hint = fmt::format("; did you mean '{}'?", *near);
  throw ConfigError(
      fmt::format("{}: missing required key '{}' at '{}'{}", loc_.str(), key, child_path(path_, key), hint));
}

Node& Node::set(const std::string& key, Node value) {
  if (is_null()) kind_ = Kind::Map;
  ATTNLAB_CHECK(is_map(), ConfigError, "{}: cannot set key '{}': expected a map {}, found {}", loc_.str(), key,
                at_path(path_), describe(*this));
  value.repath(child_path(path_, key));
  if (Node* existing = find(key)) {
    *existing = std::move(value);
    return *existing;
  }
  index_.emplace(key, keys_.size());
  keys_.push_back(key);
  children_.push_back(std::move(value));
  return children_.back();
}

bool Node::erase(const std::string& key) {
  auto it = index_.find(key);
  if (!is_map() || it == index_.end()) return false;
  const size_t i = it->second;
  index_.erase(it);
  keys_.erase(keys_.begin() + std::ptrdiff_t(i));
  children_.erase(children_.begin() + std::ptrdiff_t(i));
  for (auto& [k, j] : index_) {
    if (j > i) --j;
  }
  return true;
}

size_t Node::size() const { return (is_map() || is_seq()) ? children_.size() : 0; }

const Node& Node::operator[](size_t i) const {
  ATTNLAB_CHECK(is_seq() || is_map(), ConfigError, "{}: expected a list {} (taking item {}), found {}", loc_.str(),
                at_path(path_), i, describe(*this));
  ATTNLAB_CHECK(i < children_.size(), ConfigError, "{}: index {} out of range {} (the list has {} items)", loc_.str(),
                i, at_path(path_), children_.size());
  return children_[i];
}

Node& Node::push_back(Node value) {
  if (is_null()) kind_ = Kind::Seq;
  ATTNLAB_CHECK(is_seq(), ConfigError, "{}: cannot append: expected a list {}, found {}", loc_.str(), at_path(path_),
                describe(*this));
  value.repath(index_path(path_, children_.size()));
  children_.push_back(std::move(value));
  return children_.back();
}

void Node::merge(const Node& over) {
  if (is_map() && over.is_map()) {
    for (size_t i = 0; i < over.keys_.size(); ++i) {
      Node* mine = find(over.keys_[i]);
      if (mine != nullptr && mine->is_map() && over.children_[i].is_map()) {
        mine->merge(over.children_[i]);
      } else {
        set(over.keys_[i], over.children_[i]);
      }
    }
    return;
  }
  const std::string keep = path_;
  *this = over;
  repath(keep);
}

void Node::repath(const std::string& path) {
  path_ = path;
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i].repath(is_map() ? child_path(path_, keys_[i]) : index_path(path_, i));
  }
}

std::optional<std::string> did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // Levenshtein distance with two rows.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const size_t d = distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace attnlab::config
