#pragma once
// A config tree as JSON, beside the YAML the runner stores (the results file's /config_json, a
// sweep folder's sweep.json), so that a reader needs no YAML library (docs/RESULTS.md).
#include <attnlab/config/node.hpp>

#include <string>
#include <string_view>

namespace attnlab::config {

/// `node` as one line of JSON: maps as objects (keys in order), lists as arrays, nulls as null.
/// A scalar is typed as a YAML 1.2 reader of to_yaml(node) types it (the core schema): true and
/// false (any case style) are booleans, "no", "on", "yes" and "null" stay strings (yaml-cpp quotes
/// "null"); [-+]digits, 0o.. and 0x.. are integers, other numbers floats (1e-05 included), .inf and
/// .nan the Infinity and NaN that Python's json module reads.
std::string to_json(const Node& node);
/// One scalar's text as to_json writes it (typed as above, else a JSON string).
std::string json_scalar(const std::string& text);
/// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

}  // namespace attnlab::config
