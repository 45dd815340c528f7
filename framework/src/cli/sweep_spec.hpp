#pragma once
// `runner sweep`: what a sweep is (an experiment, axes, plain overrides) and its expansion into
// runs. Pure functions of their arguments (the sweep file is the only thing read), so they are
// unit-tested alone (tests/cli_sweep_spec_test.cpp).
//
// Command-line rules for `key=value` after the experiment:
// - The value is split at commas that are outside quotes ('...', "...") and brackets ([], {}, ()):
//   `model.norm=first,last` is an axis of two values; `key=[1,2]`, `key={a: 1, b: 2}` and
//   `key='a,b'` are one value each (the quotes reach the runner, whose YAML removes them).
// - An item `range(a,b)` or `range(a,b,step)` (integers, b excluded, as Python's range) stands for
//   its values: `seed=range(0,10)`, `seed=range(0,3),10`.
// - A value with one item and no range() is a plain override, applied to every run.
// - Errors (ConfigError, before anything runs): an empty item (`a,,b`, `a,`), a range that is
//   empty, malformed, or has step 0, a value twice in one axis, a key given twice, and two keys of
//   which one lies inside the other (`model=...` and `model.norm=...`).
#include <attnlab/config/node.hpp>

#include <string>
#include <vector>

namespace attnlab::cli::sweep {

struct Axis {
  std::string key;
  std::vector<std::string> values;  // override text, as the runner's key=value gets it
};

struct Spec {
  std::string experiment;              // experiment file
  std::vector<Axis> axes;              // in the order given; the last varies fastest
  std::vector<std::string> overrides;  // plain "key=value", every run
  std::string output;                  // the sweep file's `output:` ("" when not given)
};

struct RunSpec {
  std::string name;                    // file stem from the axis values ("run" without axes)
  std::vector<std::string> overrides;  // "key=value", one per axis
};

/// Items of one value text split at top-level commas, range() items expanded. `key` names the
/// axis in errors.
std::vector<std::string> split_values(const std::string& key, const std::string& text);

/// Adds command-line arguments ("key=value") to `spec`: axes and plain overrides. A malformed one
/// (no '=', an empty key) and every rule above are ConfigErrors.
void add_arguments(Spec& spec, const std::vector<std::string>& args);

/// True when the file is YAML whose top level is a map holding `sweep:` (a sweep file, or a sweep
/// folder's manifest); false for anything else, an experiment file included.
bool is_sweep_file(const std::string& path);

/// A sweep file:
///   sweep:
///     experiment: corners_norm_first.yaml   # relative to the sweep file
///     axes:                                 # key: [values] or key: "command-line text"
///       model.norm: [first, last]
///       seed: range(0,10)
///     overrides: [trainer.max_epochs=5]     # or a map {trainer.max_epochs: 5}
///     output: results/norm-sweep            # optional, relative to the working directory
/// A list's items are one value each (never split; a map or list item becomes flow YAML); a string
/// follows the command-line rules. Other top-level keys are ignored (a manifest's `runs:`).
Spec read_sweep_file(const std::string& path);

/// The cartesian product of the axes, the last axis varying fastest; names are file_stem() of the
/// axis overrides, made unique with "-2", "-3", ... where two sanitise to the same text.
std::vector<RunSpec> expand(const Spec& spec);

/// "model.norm=first_seed=3": each axis override with every byte outside [A-Za-z0-9._=+-] as '_',
/// joined by '_'; a leading '.' becomes '_'; more than 200 bytes are cut to 191 plus '-' and 8 hex
/// digits of a hash of the whole.
std::string file_stem(const std::vector<std::string>& overrides);

/// Checks the keys of all axes and overrides together (twice, or one inside another).
void check_keys(const Spec& spec);

/// The key of "key=value" (trimmed).
std::string key_of(const std::string& assignment);

/// A config node as one line of flow YAML ("[1, 2]", "{a: 1}", "x").
std::string flow_yaml(const config::Node& node);

}  // namespace attnlab::cli::sweep
