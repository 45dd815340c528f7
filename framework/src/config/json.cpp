#include "config/json.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace attnlab::config {
namespace {

bool digits(std::string_view s, bool (*ok)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}
bool dec(char c) { return c >= '0' && c <= '9'; }
bool oct(char c) { return c >= '0' && c <= '7'; }
bool hex(char c) { return dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string_view unsigned_part(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
}

/// YAML 1.2 core schema: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool core_float(std::string_view s) {
  s = unsigned_part(s);
  const size_t e = s.find_first_of("eE");
  const std::string_view mantissa = s.substr(0, e);
  if (e != std::string_view::npos && !digits(unsigned_part(s.substr(e + 1)), dec)) return false;
  const size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return digits(mantissa, dec);
  const auto whole = mantissa.substr(0, dot), frac = mantissa.substr(dot + 1);
  return (whole.empty() || digits(whole, dec)) && (frac.empty() || digits(frac, dec)) && !(whole.empty() && frac.empty());
}

/// The JSON number for an integer in base `base` (digits only, no sign); "" when it does not fit
/// 64 bits (it is then kept as a string).
std::string based(std::string_view text, int base) {
  errno = 0;
  char* end = nullptr;
  const std::string s(text);
  const unsigned long long v = std::strtoull(s.c_str(), &end, base);
  return errno == ERANGE || end != s.c_str() + s.size() ? std::string() : std::to_string(v);
}

std::string typed_scalar(const std::string& t) {
  if (t == "true" || t == "True" || t == "TRUE") return "true";
  if (t == "false" || t == "False" || t == "FALSE") return "false";
  const std::string_view s(t);
  if (digits(unsigned_part(s), dec)) {  // any length: JSON and Python hold it exactly
    const auto body = unsigned_part(s);
    const size_t first = std::min(body.find_first_not_of('0'), body.size() - 1);
    const auto number = std::string(body.substr(first));
    return s[0] == '-' && number != "0" ? "-" + number : number;
  }
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o' && digits(s.substr(2), oct)) {
    if (auto n = based(s.substr(2), 8); !n.empty()) return n;
  }
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && digits(s.substr(2), hex)) {
    if (auto n = based(s.substr(2), 16); !n.empty()) return n;
  }
  if (t == ".inf" || t == ".Inf" || t == ".INF" || t == "+.inf" || t == "+.Inf" || t == "+.INF") return "Infinity";
  if (t == "-.inf" || t == "-.Inf" || t == "-.INF") return "-Infinity";
  if (t == ".nan" || t == ".NaN" || t == ".NAN") return "NaN";
  if (core_float(s)) {
    const double v = std::strtod(t.c_str(), nullptr);
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";  // 1e999
    std::string out = fmt::format("{}", v);  // the shortest text that reads back to v
    if (out.find_first_of(".e") == std::string::npos) out += ".0";  // a float stays a float
    return out;
  }
  return {};
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append(std::string& out, const Node& n) {
  switch (n.kind()) {
    case Node::Kind::Null:
      out += "null";
      break;
    case Node::Kind::Scalar:
      out += json_scalar(n.str());
      break;
    case Node::Kind::Seq:
      out += '[';
      for (size_t i = 0; i < n.size(); ++i) {
        if (i > 0) out += ", ";
        append(out, n[i]);
      }
      out += ']';
      break;
    case Node::Kind::Map: {
      out += '{';
      bool first = true;
      for (const auto& k : n.keys()) {
        if (!first) out += ", ";
        first = false;
        append_string(out, k);
        out += ": ";
        append(out, *n.find(k));
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

std::string json_scalar(const std::string& text) {
  auto typed = typed_scalar(text);
  if (typed.empty()) append_string(typed, text);
  return typed;
}

std::string json_string(std::string_view text) {
  std::string out;
  append_string(out, text);
  return out;
}

std::string to_json(const Node& node) {
  std::string out;
  append(out, node);
  return out;
}

}  // namespace attnlab::config
