#pragma once
// Typed errors (LibTorch style): every message says where and expected vs found.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace attnlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Bad experiment file, override or plugin option (message carries file:line:col and YAML path).
class ConfigError : public Error {
 public:
  using Error::Error;
};
/// Plugin could not be found, loaded, matched or created; or plugin code threw.
class PluginError : public Error {
 public:
  using Error::Error;
};
/// Missing, corrupt or unreadable data (names the file).
class DataError : public Error {
 public:
  using Error::Error;
};
/// Results file could not be written or is not an attnlab results file.
class ResultsError : public Error {
 public:
  using Error::Error;
};

}  // namespace attnlab

/// ATTNLAB_CHECK(cond, ErrorType, "fmt {}", args...): throw ErrorType(fmt::format(...)) unless cond.
#define ATTNLAB_CHECK(cond, ErrorType, ...)                 \
  do {                                                      \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
