#pragma once
// Durations as people read them in tables and progress lines.
#include <string>

namespace attnlab {

/// "4.25s", "12.3s", "4m05s", "1h02m"
std::string format_seconds(double s);

}  // namespace attnlab
