#pragma once
// ATTNLAB_OP_COUNTS=FILE: counts the ATen operators and autograd nodes every epoch runs, for
// bench/run's op counts (bench/README.md). A diagnostic: nothing is counted without it.
#include <cstdint>
#include <memory>
#include <string>

namespace attnlab::run {

class OpCounter {
 public:
  /// A counter appending to $ATTNLAB_OP_COUNTS, or nullptr when it is unset.
  static std::unique_ptr<OpCounter> from_environment();
  explicit OpCounter(std::string path);
  ~OpCounter();
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;

  /// Appends one JSON line with what was counted since the last call (or since construction) and
  /// starts counting again: {"epoch", "aten_ops", "top_level_aten_ops", "backward_nodes",
  /// "top": [[name, count], ...], "top_level_top": [...]} (the 25 most frequent names among all
  /// the ops, and among those called outside any other op: what the code itself dispatched).
  void epoch(int64_t epoch);

 private:
  std::string path_;
  uint64_t handle_ = 0;
};

}  // namespace attnlab::run
