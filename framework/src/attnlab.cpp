// libattnlab.so: the framework modules are linked in whole; this file holds what only the whole
// library knows.
#include <attnlab/results/reader.hpp>
#include <attnlab/version.hpp>

#include <ATen/Parallel.h>

namespace attnlab {
// The plugin folder of the build that made this library (searched by the runner by default).
extern const char* const kBuildPluginDir;
const char* const kBuildPluginDir = ATTNLAB_PLUGIN_DIR;
}  // namespace attnlab

namespace {
// A read of a results file rehearsed in a forked copy (results::rehearse_read) may run torch ops;
// the parent's OpenMP threads are not in the copy, so torch works on one thread there.
const bool kForkedReadsOnOneThread = [] {
  attnlab::results::set_forked_read_setup([] { at::set_num_threads(1); });
  return true;
}();
}  // namespace
