#pragma once
// One HDF5 results file per run (layout: docs/RESULTS.md). Flushed after every epoch; the
// status attribute says whether the run is running, completed, interrupted, failed or diverged.
// Needs no LibTorch: arrays are attnlab/results/array.hpp's; attnlab/results/tensor.hpp writes and
// reads tensors through them.
#include <attnlab/results/array.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::results {

enum class Status { Running, Completed, Interrupted, Failed, Diverged };
const char* status_name(Status s);  // "running", ...

struct Sample {
  std::string source, reference, hypothesis;
  double bleu = 0.0;
};

/// One recorded attention map, /attention/<sample>/<module>. Labels are empty when the inputs
/// were not text; files written before layers and sides were stored read back layers 0, 1, ...
/// and empty sides.
struct Attention {
  FloatArray weights;                                           // [layers, heads, queries, keys]
  std::vector<std::string> query_tokens = {}, key_tokens = {};  // a label per query / key, or none
  std::vector<int64_t> layers = {};                             // the layer of each row of weights; empty = 0, 1, ...
  std::string query_side = {}, key_side = {};                   // nn::side_name ("source", ...); "" = not said
};

class Results {
 public:
  /// Create (truncate) `path`, making parent folders; root attrs experiment + status=running.
  Results(const std::string& path, const std::string& experiment);
  /// Open an existing results file read-write without truncating it (a resumed run, `runner
  /// eval`): attributes, config and metric series stay; the status is left as it is (a resumed
  /// run sets it back to running). ResultsError "not an attnlab results file: <path> (<why>)"
  /// when it is missing, not HDF5 or lacks the root attributes experiment and status.
  enum class Open { Existing };
  Results(const std::string& path, Open mode);
  ~Results();  // closes; never throws
  Results(const Results&) = delete;
  Results& operator=(const Results&) = delete;

  const std::string& path() const { return path_; }

  // Root attributes (string, integer, float, list of strings).
  void set_attr(const std::string& name, const std::string& value);
  void set_attr(const std::string& name, const char* value) { set_attr(name, std::string(value)); }
  void set_attr(const std::string& name, int64_t value);
  void set_attr(const std::string& name, double value);
  void set_attr(const std::string& name, const std::vector<std::string>& value);
  void set_status(Status status);  // also sets "finished" (UTC ISO-8601) for terminal states

  /// /config: the fully resolved YAML as one string dataset.
  void write_config(const std::string& yaml);
  /// /metrics/<group>/<name>: 1-D float64, extendible, one row appended per call.
  void append_metric(const std::string& group, const std::string& name, double value);
  /// Rows of every metric series, keyed "<group>/<name>" (for checkpoints: where to cut on resume).
  std::map<std::string, int64_t> metric_rows() const;
  /// Cut every metric series back to `rows["<group>/<name>"]` rows; series not in `rows` (begun
  /// after the checkpoint) are removed. ResultsError when a series is shorter than asked.
  void truncate_metrics(const std::map<std::string, int64_t>& rows);
  /// /samples/{source,reference,hypothesis} (strings) and /samples/bleu (float64); replaces.
  void write_samples(const std::vector<Sample>& samples);
  /// /attention/<sample>/<module>: float32 weights [layers, heads, queries, keys] with attrs
  /// query_tokens, key_tokens (string lists, may be empty), dims, layers (int64 [layers]), heads
  /// (int64), and query_side, key_side (strings, when given). Recorded attention is written by
  /// train::write_attention (attnlab/train/attention_results.hpp), which fills all of them.
  void write_attention(const std::string& sample, const std::string& module, const Attention& attention);
  /// An array as /<path> (e.g. "predictions/test") with its shape, float32 or int64; replaces.
  /// (Tensors: results::write_tensor in attnlab/results/tensor.hpp.)
  void write_array(const std::string& path, const FloatArray& values);
  void write_array(const std::string& path, const IntArray& values);
  /// A 1-D string dataset at /<path> (e.g. "eval/test/hypotheses"); replaces.
  void write_strings(const std::string& path, const std::vector<std::string>& values);
  /// Attributes on the group or dataset at /<path> (made as a group when missing); replace.
  void set_attr_at(const std::string& path, const std::string& name, const std::string& value);
  void set_attr_at(const std::string& path, const std::string& name, double value);
  void set_attr_at(const std::string& path, const std::string& name, int64_t value);
  void set_attr_at(const std::string& path, const std::string& name, const std::vector<std::string>& values);
  void set_attr_at(const std::string& path, const std::string& name, const std::vector<double>& values);
  /// Removes the group or dataset /<path> and everything under it; nothing when it is absent.
  void remove(const std::string& path);
  /// Names of the links in the group /<path>, sorted; empty when it does not exist.
  std::vector<std::string> children(const std::string& path) const;
  /// Renames the group or dataset /<from> to /<to> (made with its parent groups), replacing what
  /// /<to> held. ResultsError when /<from> does not exist.
  void move(const std::string& from, const std::string& to);
  /// Push everything to disk (H5Fflush) so a kill leaves a readable file.
  void flush();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

/// Current UTC time as ISO-8601 ("2026-11-22T12:00:00Z").
std::string utc_now();

}  // namespace attnlab::results
