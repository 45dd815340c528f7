#include "core/duration.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

namespace attnlab {

std::string format_seconds(double s) {
  if (s < 10) return fmt::format("{:.2f}s", s);
  if (s < 60) return fmt::format("{:.1f}s", s);
  const auto t = static_cast<int64_t>(std::lround(s));
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
}

}  // namespace attnlab
