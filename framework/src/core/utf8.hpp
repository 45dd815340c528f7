#pragma once
// UTF-8, one character at a time (not part of the SDK): what the dataset's text rules (data/text.cpp)
// decode with, and what the plot's canvas cleans its labels with. In core, so that the tools, which
// link no LibTorch, have it too.
#include <string>

namespace attnlab::utf8 {

/// Reads the character at `s[i]` into `cp` and `len`; returns "" or why the bytes there are not
/// UTF-8 ("byte 0xff cannot start a character"), naming no offset (the callers place it).
std::string next_code_point(const std::string& s, size_t i, char32_t& cp, int& len);

/// `s` with each byte that does not begin a valid UTF-8 character replaced by U+FFFD (cairo stops
/// drawing at the first invalid byte of a label).
std::string with_replacements(const std::string& s);

}  // namespace attnlab::utf8
