#pragma once
// The text dataset's lines: joined into one stream and split back out of its characters.
#include <attnlab/data/text.hpp>

#include <string>
#include <vector>

namespace attnlab::datasets::text {

/// Lines joined with '\n' (no newline after the last).
inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines[i];
  }
  return out;
}

/// UTF-8 characters -> their lines (split at '\n', which no line keeps).
inline std::vector<std::string> lines_of(const std::vector<char32_t>& chars) {
  std::vector<std::string> lines(1);
  for (char32_t ch : chars) {
    if (ch == U'\n') {
      lines.emplace_back();
    } else {
      lines.back() += data::utf8_char(ch);
    }
  }
  return lines;
}

}  // namespace attnlab::datasets::text
