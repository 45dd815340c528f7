#pragma once
// What a "no plugin named" message adds about the libraries a scan skipped (issue 42).
#include <attnlab/plugin/registry.hpp>

#include <string>

namespace attnlab::plugin {

/// "; N plugin librar(y|ies) could not be loaded and may provide it (see the warning above): PATHS"
/// for the skipped libraries whose file names do not say what they provide (a duplicate of a
/// loaded plugin is not a candidate; at most 3 paths, then "..."), or "" when there are none.
std::string skipped_candidates(const Registry& registry);

}  // namespace attnlab::plugin
