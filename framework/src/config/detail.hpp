#pragma once
// Helpers shared by the config module's sources (not part of the SDK).
#include <attnlab/config/node.hpp>
#include <string>

namespace attnlab::config::detail {

/// "'text'" for a scalar, "a map", "a list" or "null": the "found ..." part of messages.
std::string describe(const Node& node);
/// Give `node` and all its descendants the location `loc` (values from the command line/defaults).
void relocate(Node& node, const Location& loc);

}  // namespace attnlab::config::detail
