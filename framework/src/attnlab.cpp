// libattnlab.so: the framework modules are linked in whole; this file holds nothing else.
#include <attnlab/version.hpp>

namespace attnlab {
// The plugin folder of the build that made this library (searched by the runner by default).
extern const char* const kBuildPluginDir;
const char* const kBuildPluginDir = ATTNLAB_PLUGIN_DIR;
}  // namespace attnlab
