#pragma once
// Read-only access to a results file written by Results (layout: docs/RESULTS.md), for
// `runner compare` / `runner plot` and tests. Every failure is a ResultsError naming the file.
#include <attnlab/results/array.hpp>
#include <attnlab/results/results.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::results {

/// "running", ... back to the enum; ResultsError for anything else.
Status parse_status(const std::string& name);

/// What the read check allows the checking process before it calls a file damaged.
struct ReadCheckLimits {
  int seconds = 60;                      // wall time to read everything
  uint64_t memory_bytes = 1ULL << 30;    // address space on top of what the process maps already
  /// The defaults for the file at `path`: 60 s + 1 s per 8 MiB, 1 GiB + 16 times its size.
  /// ATTNLAB_READ_CHECK_SECONDS (whole seconds) replaces the time.
  static ReadCheckLimits for_file(const std::string& path);
};

/// Read every object of an HDF5 file (each group's links, each object's attributes, each dataset
/// whole, variable-length strings included) in a forked child process, and return when HDF5
/// survived that. The HDF5 library that Debian ships (1.10.8) can crash, loop forever or allocate
/// gigabytes on a damaged file, which no exception can catch; this turns each into a ResultsError
/// "results file <path> is damaged: HDF5 crashed reading it (signal 11, SIGSEGV) ..." (or "did
/// not finish reading it within N s", "needed more than X GiB of memory"), or, when a live run
/// holds the file, names that run. What HDF5 refuses cleanly is left to the reader.
void check_readable(const std::string& path, const ReadCheckLimits& limits);

/// Run `read`, which reads the results file at `path` and changes nothing outside this process,
/// in a forked copy of this process, under check_readable's limits, and return when HDF5 survived
/// it there; else the same ResultsError as check_readable. The copy starts in this process's exact
/// state (HDF5's caches included), so what HDF5 does in it, it would do here: a command rehearses
/// its own reads, then makes them (read_isolated). An exception that ends `read` in the copy is
/// thrown here (ConfigError, DataError, else ResultsError, with its message) and the real read is
/// not made: on some damaged files HDF5 fails cleanly in one process and loops in another.
void rehearse_read(const std::string& path, const std::function<void()>& read);

/// rehearse_read(path, read), then read() here, returning what it returns. Inside `read`, open
/// the file with ReadCheck::none: the rehearsal is the check.
template <class Read>
auto read_isolated(const std::string& path, Read&& read) -> decltype(read()) {
  rehearse_read(path, [&] { (void)read(); });
  return read();
}

/// What the forked copy of check_readable and rehearse_read runs first. A process with LibTorch
/// sets torch to one thread there, since the parent's OpenMP threads are not in the copy
/// (libattnlab does this as it loads); a process without LibTorch has nothing to set.
void set_forked_read_setup(void (*setup)());

/// How ResultsReader opens a file.
enum class ReadCheck {
  before_open,  // check_readable first (the default: a damaged file is an error, not a crash)
  none,         // open it directly: HDF5's own failures reach this process (the fuzz target)
};

class ResultsReader {
 public:
  /// Open read-only. ResultsError "not an attnlab results file: <path> (<why>)" when the file is
  /// not HDF5 or lacks the root attributes "experiment" and "status"; "results file <path> is
  /// damaged: ..." when HDF5 cannot read it without crashing (check_readable).
  explicit ResultsReader(const std::string& path, ReadCheck check = ReadCheck::before_open);
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
  /// Any numeric dataset as float32 values with its shape (results::read_tensor in
  /// attnlab/results/tensor.hpp makes it a tensor).
  FloatArray array(const std::string& path) const;
  /// Whether the dataset at `path` holds strings (else numbers, for array()).
  bool holds_strings(const std::string& path) const;
  /// A string dataset ("eval/test/hypotheses") as a list.
  std::vector<std::string> strings(const std::string& path) const;
  /// An attribute of the group or dataset at `path` ("eval/test"): a string, or any number.
  std::string attr_string_at(const std::string& path, const std::string& name) const;
  double attr_double_at(const std::string& path, const std::string& name) const;
  /// A list attribute of the object at `path`: strings (one string reads as a list of one), or
  /// numbers (an integer or floating-point scalar or 1-D attribute).
  std::vector<std::string> attr_strings_at(const std::string& path, const std::string& name) const;
  std::vector<double> attr_doubles_at(const std::string& path, const std::string& name) const;
  /// Whether the group or dataset at `path` exists and has the attribute `name`.
  bool has_attr_at(const std::string& path, const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

/// Every read that attnlab's commands make of a results file, through `in`, in the order `runner
/// compare` makes them (root attributes, /config, metrics, samples, attention, declared figures),
/// then each dataset and common attribute of every group four levels deep. A refusal (attnlab::Error) ends
/// only the read it came from; anything else propagates. The read check's child runs it first;
/// the results_reader fuzz target runs it on every input.
void read_all(const ResultsReader& in);

}  // namespace attnlab::results
