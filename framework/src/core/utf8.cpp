// UTF-8, one character at a time (core/utf8.hpp).
#include "core/utf8.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace attnlab::utf8 {

std::string next_code_point(const std::string& s, size_t i, char32_t& cp, int& len) {
  const size_t n = s.size();
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    len = 1, cp = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07;
  } else {
    return fmt::format("byte 0x{:02x} cannot start a character", b0);
  }
  if (i + len > n) {
    return fmt::format("byte 0x{:02x} starts a {}-byte character, but the text ends after {}", b0, len, n - i);
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      return fmt::format("byte 0x{:02x} starts a {}-byte character, but its byte {} is 0x{:02x} (not 0x80-0xbf)", b0,
                         len, k + 1, b);
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return fmt::format("overlong, surrogate or out-of-range character U+{:04X}", static_cast<uint32_t>(cp));
  }
  return "";
}

std::string with_replacements(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    int len = 0;
    if (next_code_point(s, i, cp, len).empty()) {
      out.append(s, i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD in place of the one byte
      ++i;
    }
  }
  return out;
}

}  // namespace attnlab::utf8
