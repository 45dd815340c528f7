#pragma once
// Loading a plugin library in a forked copy of the process before it is loaded for real (issue
// 42): a library whose static constructor aborts or crashes is skipped with one line, instead of
// taking the runner, and every run whose plugin path holds it, down with it. What a probe learned
// is cached, so that a healthy folder is dlopen-ed directly on the next scan.
#include <functional>
#include <string>

namespace attnlab::plugin::probe {

/// What loading one library did in the probing process.
struct Outcome {
  bool survived = true;
  std::string reason;      // when it did not: "<path>: loading it crashed (SIGABRT) in a separate probing process"
  std::string kind, name;  // what its descriptor says it provides, when the probe got that far
};

/// Called by the probing process to say what a library provides (before anything that may crash).
using Report = std::function<void(const std::string& kind, const std::string& name)>;

/// Whether loading `path` survives: from the cache when it holds this file (real path, size,
/// mtime) for this runner (libattnlab.so's own path, size and mtime, and the SDK hash), else by
/// running `rehearse` in a forked child under an alarm (ATTNLAB_PLUGIN_PROBE_SECONDS, default 60)
/// and caching it when it survived (one that crashed or timed out is probed again next time). The cache is
/// $ATTNLAB_CACHE/plugin-probes.tsv, else ~/.cache/attnlab/plugin-probes.tsv; one that cannot be
/// read or written only costs a probe. ATTNLAB_PLUGIN_PROBE_LOG=FILE appends the path of each
/// library probed in a child to FILE (for tests).
Outcome check(const std::string& path, const std::string& sdk_hash, const std::function<void(const Report&)>& rehearse);

/// Writes what this process's probes learned to the cache, once (Registry::discover calls it after
/// a scan; what is not saved is probed again next time). ATTNLAB_PLUGIN_PROBE_LOG gets a line
/// "cache written" when it wrote.
void save();

}  // namespace attnlab::plugin::probe
