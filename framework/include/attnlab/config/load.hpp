#pragma once
// Loading an experiment: includes/defaults composition, then command-line overrides.
#include <attnlab/config/node.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::config {

/// The largest experiment (or included) file read, in bytes; a bigger one is a ConfigError.
inline constexpr std::uintmax_t kMaxConfigBytes = 4u << 20;

/// Load an experiment file (and each file it includes): a regular file of at most kMaxConfigBytes
/// whose tree has at most kMaxConfigNodes values; anything else (a directory, a FIFO, a device) is
/// a ConfigError naming it.
/// - `defaults: [base.yaml, ...]` (paths relative to the including file) are loaded first, in
///   order, then this file is merged over them (maps merge deeply; scalars/lists replace).
///   Include cycles and missing files are ConfigErrors naming the including place.
/// - `overrides` are "a.b.c=value" strings (value parsed as YAML, so `x=[1,2]` works); a key
///   path that does not exist in the merged tree is still set (validation catches typos later,
///   with a did-you-mean). A malformed override is a ConfigError naming it.
/// The returned root has no `defaults` key.
Node load_experiment(const std::string& path, const std::vector<std::string>& overrides = {});

/// Apply one "a.b.c=value" override to root.
void apply_override(Node& root, const std::string& assignment);

}  // namespace attnlab::config
