#pragma once
// Pieces of the results file's own layout (docs/RESULTS.md) that the writer builds: metric series
// and the NeXus-style descriptions generic viewers read. Not part of the SDK.
#include <string>
#include <vector>

#include "results/hdf5.hpp"

namespace attnlab::results {

/// A string attribute of `obj` unless it already has one by that name.
void set_if_absent(hid_t obj, const char* name, const std::string& value, const std::string& file);

/// NeXus-style description of the group `parent`/`group` (docs/RESULTS.md, "Generic viewers"):
/// what a viewer such as h5web or HDFView needs to draw its `signal` without attnlab. The first
/// series written becomes the group's signal (a "loss" always does); the parent is an NXentry
/// whose default is its first group, and the root's default is the first entry.
void describe_nexus(hid_t root, const std::string& parent, const std::string& group, const std::string& signal,
                    const std::string& file);

/// Appends `values` to metric series `key` ("group/name") under /metrics, creating it (and its
/// NeXus description) first. ResultsError naming `file` when a dataset there is no 1-D series.
void append_rows(hid_t root, const std::string& key, const std::vector<double>& values, const std::string& file);

}  // namespace attnlab::results
