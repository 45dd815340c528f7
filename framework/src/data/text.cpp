// d2l's text rules on UTF-8: decoding to code points (and a code point back to UTF-8),
// Python-compatible lowercasing for the scripts the corpora use, and MTFraEng._preprocess.
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/utf8.hpp"

namespace attnlab::data {
namespace {

using utf8::next_code_point;

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

bool even(char32_t c) { return c % 2 == 0; }

/// Python's one-to-one lowercase mapping for the covered blocks (c itself when none).
char32_t lower_simple(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') ? c + 0x20 : c;
  // Latin-1 Supplement: À..Þ except × (U+00D7).
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  // Latin Extended-A: mostly upper/lower pairs; U+0130 (İ) is handled by the caller.
  if (c >= 0x100 && c <= 0x17F) {
    if ((c <= 0x12F || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) && even(c)) return c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && !even(c)) return c + 1;
    if (c == 0x178) return 0xFF;  // Ÿ -> ÿ
    return c;
  }
  // Greek (U+0370..U+03FF, the letters Python lowercases one-to-one).
  if (c >= 0x370 && c <= 0x3FF) {
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 0x20;  // Α..Ϋ
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 0x25;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 0x3F;
    if (c == 0x370 || c == 0x372 || c == 0x376) return c + 1;
    if (c == 0x37F) return 0x3F3;
    if (c == 0x3CF) return 0x3D7;
    if (c >= 0x3D8 && c <= 0x3EF && even(c)) return c + 1;
    if (c == 0x3F4) return 0x3B8;
    if (c == 0x3F7 || c == 0x3FA) return c + 1;
    if (c == 0x3F9) return 0x3F2;
    if (c >= 0x3FD) return c - 0x82;  // Ͻ..Ͽ -> ͻ..ͽ
    return c;
  }
  // Cyrillic and Cyrillic Supplement.
  if (c >= 0x400 && c <= 0x52F) {
    if (c <= 0x40F) return c + 0x50;
    if (c <= 0x42F) return c + 0x20;
    if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0)) && even(c)) return c + 1;
    if (c == 0x4C0) return 0x4CF;
    if (c >= 0x4C1 && c <= 0x4CE && !even(c)) return c + 1;
    return c;
  }
  return c;
}

/// Cased letters among the covered blocks (for Greek final sigma).
bool is_cased(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') || (c >= U'a' && c <= U'z');
  if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
  if (c >= 0xC0 && c <= 0xFF) return c != 0xD7 && c != 0xF7;
  if (c >= 0x100 && c <= 0x24F) return true;
  if (c >= 0x370 && c <= 0x3FF) return lower_simple(c) != c || (c >= 0x3AC && c <= 0x3CE) || c == 0x390 ||
                                       (c >= 0x3D0 && c <= 0x3F5) || c >= 0x3F7;
  if (c >= 0x400 && c <= 0x52F) return !(c >= 0x482 && c <= 0x489);
  return false;
}

/// Lowercase code points as Python's str.lower does (İ expands to "i" + U+0307; Σ becomes final
/// ς after a cased letter when no cased letter follows).
std::vector<char32_t> lower_codepoints(const std::vector<char32_t>& in) {
  std::vector<char32_t> out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char32_t c = in[i];
    if (c == 0x130) {
      out.push_back(U'i');
      out.push_back(0x307);
    } else if (c == 0x3A3) {
      const bool after_cased = i > 0 && is_cased(in[i - 1]);
      const bool before_cased = i + 1 < in.size() && is_cased(in[i + 1]);
      out.push_back(after_cased && !before_cased ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(lower_simple(c));
    }
  }
  return out;
}

}  // namespace

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    int len = 0;
    if (const auto why = next_code_point(s, i, cp, len); !why.empty()) {
      throw DataError(fmt::format("invalid UTF-8 at byte {}: {}", i, why));
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string utf8_char(char32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

void require_utf8(const std::string& s) { (void)code_points(s); }

void require_utf8(const std::string& text, const std::string& where) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < text.size();) {
    // ASCII runs first: a corpus is mostly ASCII.
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b == '\n') ++line, line_start = i + 1;
      ++i;
      continue;
    }
    char32_t cp = 0;
    int len = 0;
    if (const auto why = next_code_point(text, i, cp, len); !why.empty()) {
      throw DataError(fmt::format("{}:{}: invalid UTF-8 at byte {} (byte {} of the line): {}", where, line, i,
                                  i - line_start + 1, why));
    }
    i += static_cast<size_t>(len);
  }
}

std::string utf8_lower(const std::string& s) { return encode_utf8(lower_codepoints(code_points(s))); }

std::string d2l_preprocess(const std::string& text) {
  // text = text.replace('\u202f', ' ').replace('\xa0', ' ')
  std::vector<char32_t> original = code_points(text);
  for (char32_t& c : original) {
    if (c == 0x202F || c == 0xA0) c = U' ';
  }
  // out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char
  //        for i, char in enumerate(text.lower())]
  // The previous character comes from the text *before* lowercasing, indexed by the position
  // in the lowercased text (identical unless a character expands, like İ).
  const std::vector<char32_t> lowered = lower_codepoints(original);
  std::vector<char32_t> out;
  out.reserve(lowered.size() + lowered.size() / 8);
  for (size_t i = 0; i < lowered.size(); ++i) {
    const char32_t c = lowered[i];
    const bool punct = c == U',' || c == U'.' || c == U'!' || c == U'?';
    const bool prev_not_space = i > 0 && (i - 1 >= original.size() || original[i - 1] != U' ');
    if (punct && prev_not_space) out.push_back(U' ');
    out.push_back(c);
  }
  return encode_utf8(out);
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(' ', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.emplace_back(s, start, end - start);
    start = end + 1;
  }
  return out;
}

}  // namespace attnlab::data
