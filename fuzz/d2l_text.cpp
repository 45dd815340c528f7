// Fuzz target: d2l's text preprocessing (data::d2l_preprocess, utf8_lower, split_spaces,
// require_utf8), which every fra-eng / Multi30K line goes through.
//
// Input: any bytes, taken as a line of text.
// Properties: malformed UTF-8 is a DataError, nothing else; for valid UTF-8 the outputs are valid
// UTF-8; lowercasing is idempotent (as Python's str.lower); d2l_preprocess only lowercases, turns
// U+202F/U+00A0 into spaces and inserts spaces; split_spaces gives non-empty tokens without spaces
// that join back to the text less its spaces.
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>

#include <cstdint>
#include <string>

#include "common.hpp"

namespace {

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out += c;
  return out;
}

void require_valid(const std::string& s, const std::string& what) {
  try {
    attnlab::data::require_utf8(s);
  } catch (const attnlab::DataError& e) {
    fuzz::fail(what + " is not valid UTF-8: " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string pre;
  try {
    pre = attnlab::data::d2l_preprocess(text);
  } catch (const attnlab::DataError&) {
    // Malformed UTF-8: every function that decodes must refuse it the same way.
    try {
      attnlab::data::require_utf8(text);
    } catch (const attnlab::DataError&) {
      try {
        attnlab::data::require_utf8(text, "in.txt");
      } catch (const attnlab::DataError&) {
        return 0;
      }
      fuzz::fail("require_utf8(text, where) accepted text that require_utf8(text) refuses");
    }
    fuzz::fail("d2l_preprocess refused text that require_utf8 accepts");
  }
  try {
    attnlab::data::require_utf8(text, "in.txt");
  } catch (const attnlab::DataError& e) {
    fuzz::fail(std::string("require_utf8(text, where) refused text d2l_preprocess accepts: ") + e.what());
  }
  require_valid(pre, "d2l_preprocess's output");
  const std::string lower = attnlab::data::utf8_lower(text);
  require_valid(lower, "utf8_lower's output");
  if (attnlab::data::utf8_lower(lower) != lower) fuzz::fail("utf8_lower is not idempotent on '" + text + "'");

  // d2l_preprocess = (U+202F, U+00A0 -> ' ') then lower then inserted spaces.
  std::string spaced = text;
  for (const std::string nbsp : {"\u202f", "\u00a0"})
    for (size_t at; (at = spaced.find(nbsp)) != std::string::npos;) spaced.replace(at, nbsp.size(), " ");
  if (without_spaces(pre) != without_spaces(attnlab::data::utf8_lower(spaced)))
    fuzz::fail("d2l_preprocess changed more than case and spaces: '" + text + "' -> '" + pre + "'");

  std::string joined;
  for (const auto& token : attnlab::data::split_spaces(pre)) {
    if (token.empty() || token.find(' ') != std::string::npos) fuzz::fail("split_spaces gave token '" + token + "'");
    joined += token;
  }
  if (joined != without_spaces(pre)) fuzz::fail("split_spaces lost text of '" + pre + "'");
  return 0;
}
