#pragma once
// Settings read from the environment (not part of the SDK).
#include <optional>

namespace attnlab::env {

/// The seconds in environment variable `name`, or nullopt when it is unset or empty. A value that
/// is not a number from `lo` to `hi` (a whole one when `whole`) is a ConfigError naming the
/// variable, the range and what it holds.
std::optional<double> seconds(const char* name, double lo, double hi, bool whole = false);

}  // namespace attnlab::env
