#pragma once
// A word for a POSIX shell (not part of the SDK): the sweep's commands (cli/sweep_*.cpp) and the
// git calls a run's record makes (run/record.cpp) quote their arguments with it.
#include <string>

namespace attnlab {

/// `s` as one word for a POSIX shell ('single-quoted' where it needs quoting, a ' inside as '\'').
inline std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" '\"\\$`*?[]{}()<>|&;!#~") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace attnlab
