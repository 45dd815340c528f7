#pragma once
// d2l's text rules, shared by every dataset/tokenizer that uses them (one implementation).
#include <string>
#include <vector>

namespace attnlab::data {

/// d2l MTFraEng._preprocess: U+202F and U+00A0 -> ' ', lowercase (Unicode-aware for Latin
/// scripts, as Python's str.lower on this corpus), and a space inserted before any of ",.!?"
/// not already preceded by a space (except at position 0).
std::string d2l_preprocess(const std::string& text);

/// Split on ' ' dropping empty tokens (d2l's `[t for t in s.split(' ') if t]`).
std::vector<std::string> split_spaces(const std::string& s);

/// DataError naming the byte offset of the first malformed character unless `s` is valid UTF-8.
void require_utf8(const std::string& s);

/// The code points of UTF-8 text, in order (Python's list(s)); DataError naming the byte offset
/// of the first malformed character, as require_utf8.
std::vector<char32_t> code_points(const std::string& s);

/// One code point as UTF-8 (1 to 4 bytes).
std::string utf8_char(char32_t cp);

/// The same for a file's text, the error naming where it is: "<where>:<line>: invalid UTF-8 at
/// byte <offset> (byte <n> of the line): <why>", `where` being the file ("val.en.gz") or the
/// archive and member ("fra-eng.zip:fra-eng/fra.txt"). Every dataset checks its text files so.
void require_utf8(const std::string& text, const std::string& where);

/// Lowercase UTF-8 text (ASCII, Latin-1 Supplement, Latin Extended-A, Greek, Cyrillic).
std::string utf8_lower(const std::string& s);

}  // namespace attnlab::data
