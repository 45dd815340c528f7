// The key functions of the error classes: their vtables and type_info are emitted here only, in
// libattnlab (see error.hpp).
#include <attnlab/error.hpp>

#include <c10/util/Exception.h>

namespace attnlab {

Error::~Error() = default;
ConfigError::~ConfigError() = default;
PluginError::~PluginError() = default;
DataError::~DataError() = default;
ResultsError::~ResultsError() = default;
Interrupted::~Interrupted() = default;

std::string message_without_backtrace(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace attnlab
