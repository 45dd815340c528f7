#pragma once
// Helpers shared by the config module's sources (not part of the SDK).
#include <attnlab/config/node.hpp>
#include <cstddef>
#include <string>

namespace attnlab::config::detail {

/// "'text'" for a scalar, "a map", "a list" or "null": the "found ..." part of messages.
std::string describe(const Node& node);
/// Give `node` and all its descendants the location `loc` (values from the command line/defaults).
void relocate(Node& node, const Location& loc);
/// The byte offset of the first malformed UTF-8 sequence (or overlong, surrogate, > U+10FFFF) or
/// Unicode noncharacter (U+FDD0..U+FDEF, U+xFFFE, U+xFFFF) in `s`, npos when there is none.
/// yaml-cpp reads such bytes as they are but its emitter writes U+FFFD for them, so a config
/// holding them would not be the config that to_yaml stores in the results file.
size_t bad_utf8_offset(const std::string& s);
/// The key of a "key=value" override as apply_override reads it (trimmed; ConfigError when
/// malformed), and the node that key names in `root` ("model.encoder.num_heads",
/// "samples[2].src"), nullptr when there is none.
std::string override_key(const std::string& assignment);
const Node* find_key(const Node& root, const std::string& key);

}  // namespace attnlab::config::detail
