#include "core/env.hpp"

#include <attnlab/error.hpp>

#include <cmath>
#include <cstdlib>

namespace attnlab::env {

std::optional<double> seconds(const char* name, double lo, double hi, bool whole) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const double s = std::strtod(text, &end);
  const bool number = end != text && *end == '\0' && std::isfinite(s);
  ATTNLAB_CHECK(number && s >= lo && s <= hi && (!whole || s == std::floor(s)), ConfigError,
                "{}: expected {}seconds from {} to {}, found '{}'", name, whole ? "whole " : "", lo, hi, text);
  return s;
}

}  // namespace attnlab::env
