#pragma once
// GPT-2's bytes_to_unicode: each of the 256 bytes as one printable character, so that BPE works on
// characters and a token is a string of them ("Ġthe" = " the"). The bytes '!'..'~', '¡'..'¬' and
// '®'..'ÿ' are their own code point; the other 68 (controls, space, ...) take U+0100 onwards in
// byte order (space -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace attnlab::tokenizers::byte_bpe {

/// The code point GPT-2 gives each byte.
inline const std::array<char32_t, 256>& byte_code_points() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return m;
  }();
  return map;
}

/// Each byte's character as UTF-8 (all are below U+0800: one or two bytes).
inline const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> c;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = byte_code_points()[b];
      if (cp < 0x80) {
        c[b] = std::string(1, static_cast<char>(cp));
      } else {
        c[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
    return c;
  }();
  return chars;
}

/// The inverse: code point -> byte.
inline const std::unordered_map<char32_t, uint8_t>& code_point_bytes() {
  static const std::unordered_map<char32_t, uint8_t> inverse = [] {
    std::unordered_map<char32_t, uint8_t> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_code_points()[b], static_cast<uint8_t>(b));
    return m;
  }();
  return inverse;
}

}  // namespace attnlab::tokenizers::byte_bpe
