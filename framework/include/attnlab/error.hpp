#pragma once
// Typed errors (LibTorch style): every message says where and expected vs found.
//
// The classes have an out-of-line key function (the destructor, in libattnlab), so their vtables
// and type_info exist once, in libattnlab, with default visibility. A plugin that throws one
// therefore builds an object whose code lives in libattnlab, not in the plugin: the runner can
// still read it after the plugin's library is gone, and `catch (const ConfigError&)` matches the
// same type on both sides of the boundary.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

/// Marks SDK types whose identity (vtable, type_info) must be the single copy in libattnlab,
/// also when a plugin is compiled with -fvisibility=hidden.
#define ATTNLAB_API __attribute__((visibility("default")))

namespace attnlab {

class ATTNLAB_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~Error() override;
};
/// Bad experiment file, override or plugin option (message carries file:line:col and YAML path).
class ATTNLAB_API ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
};
/// Plugin could not be found, loaded, matched or created; or plugin code threw.
class ATTNLAB_API PluginError : public Error {
 public:
  using Error::Error;
  ~PluginError() override;
};
/// Missing, corrupt or unreadable data (names the file).
class ATTNLAB_API DataError : public Error {
 public:
  using Error::Error;
  ~DataError() override;
};
/// Results file could not be written or is not an attnlab results file.
class ATTNLAB_API ResultsError : public Error {
 public:
  using Error::Error;
  ~ResultsError() override;
};

/// A long phase (training, evaluation, decoding) saw the stop flag (SIGINT, SIGTERM, SIGHUP) and
/// gave up: the runner records the run as interrupted, not failed.
class ATTNLAB_API Interrupted : public Error {
 public:
  using Error::Error;
  ~Interrupted() override;
};

/// The message of any exception for a person or a results file: torch's errors without their C++
/// backtrace (c10::Error::what() appends one), everything else as what() says. Defined in
/// libattnlab (plugin/torch_errors.cpp), not in the LibTorch-free libraries the tools use.
ATTNLAB_API std::string message_without_backtrace(const std::exception& e);

}  // namespace attnlab

/// ATTNLAB_CHECK(cond, ErrorType, "fmt {}", args...): throw ErrorType(fmt::format(...)) unless cond.
#define ATTNLAB_CHECK(cond, ErrorType, ...)                 \
  do {                                                      \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
