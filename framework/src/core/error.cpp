// The key functions of the error classes: their vtables and type_info are emitted here only, in
// libattnlab (see error.hpp).
#include <attnlab/error.hpp>

namespace attnlab {

Error::~Error() = default;
ConfigError::~ConfigError() = default;
PluginError::~PluginError() = default;
DataError::~DataError() = default;
ResultsError::~ResultsError() = default;
Interrupted::~Interrupted() = default;

}  // namespace attnlab
