#pragma once
// Read-only access to a results file written by Results (layout: docs/RESULTS.md), for
// `runner compare` / `runner plot` and tests. Every failure is a ResultsError naming the file.
#include <attnlab/results/results.hpp>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::results {

/// "running", ... back to the enum; ResultsError for anything else.
Status parse_status(const std::string& name);

class ResultsReader {
 public:
  /// Open read-only. ResultsError "not an attnlab results file: <path> (<why>)" when the file is
  /// not HDF5 or lacks the root attributes "experiment" and "status".
  explicit ResultsReader(const std::string& path);
  ~ResultsReader();  // closes; never throws
  ResultsReader(const ResultsReader&) = delete;
  ResultsReader& operator=(const ResultsReader&) = delete;

  const std::string& path() const { return path_; }

  // Root attributes.
  bool has_attr(const std::string& name) const;
  std::vector<std::string> attr_names() const;                      // sorted
  std::string attr_string(const std::string& name) const;           // a scalar string attribute
  std::vector<std::string> attr_strings(const std::string& name) const;  // a list (or one) string(s)
  int64_t attr_int(const std::string& name) const;                  // an integer attribute
  double attr_double(const std::string& name) const;                // any numeric attribute
  Status status() const;                                            // the "status" attribute

  /// The resolved YAML stored as /config ("" when the run has not written it).
  std::string config() const;

  /// Groups under /metrics and series in one group, sorted by name.
  std::vector<std::string> metric_groups() const;
  std::vector<std::string> metric_names(const std::string& group) const;
  /// /metrics/<group>/<name>, one value per appended row.
  std::vector<double> metric(const std::string& group, const std::string& name) const;

  /// The /samples table (empty when absent).
  std::vector<Sample> samples() const;

  /// The sample texts under /attention (their "text" attribute), sorted by link name.
  std::vector<std::string> attention_samples() const;
  /// Modules recorded for one sample (as given to write_attention), sorted.
  std::vector<std::string> attention_modules(const std::string& sample) const;
  /// One map: weights, labels, layers (0, 1, ... when the file stores none) and sides ("" when none).
  Attention attention(const std::string& sample, const std::string& module) const;

  /// Whether an object exists at `path` ("predictions/test", "/config", ...).
  bool has(const std::string& path) const;
  /// Names of the links in the group at `path` ("eval"), sorted; empty when there is no group.
  std::vector<std::string> children(const std::string& path) const;
  /// Any numeric dataset as a float32 tensor with its shape.
  torch::Tensor tensor(const std::string& path) const;
  /// A string dataset ("eval/test/hypotheses") as a list.
  std::vector<std::string> strings(const std::string& path) const;
  /// An attribute of the group or dataset at `path` ("eval/test"): a string, or any number.
  std::string attr_string_at(const std::string& path, const std::string& name) const;
  double attr_double_at(const std::string& path, const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace attnlab::results
