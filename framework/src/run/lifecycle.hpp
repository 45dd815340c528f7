#pragma once
// The run's life cycle apart from its file: the stop flag that signals set and every phase checks,
// the watch for a non-finite loss, and the fault-injection points of the tests
// (docs/ARCHITECTURE.md, "Errors").
#include <attnlab/train/trainer.hpp>

#include <array>
#include <atomic>
#include <string>

namespace attnlab::run {

/// The process's stop flag: set by SIGINT/SIGTERM/SIGHUP while a SignalScope lives, or by a
/// DivergenceWatch; read by the trainers (TrainContext::stop) and between the phases.
std::atomic<bool>& stop_flag();

/// Installs SIGINT/SIGTERM/SIGHUP handlers that set stop_flag() (cleared first); restores the old
/// ones. Installed before the results file exists, so no signal can leave a file saying "running".
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  std::array<void (*)(int), 3> old_{};
};

/// Throws Interrupted ("interrupted during <phase>") when the stop flag is set.
void throw_if_stopped(const char* phase);

/// Any loss that is not finite, train or validation, from any trainer, ends the run "diverged":
/// the first one seen is kept ("val loss is nan at epoch 3") and the trainer is asked to stop as a
/// signal would. Every rank of a data-parallel run sees the same (reduced) numbers.
class DivergenceWatch {
 public:
  void epoch(const train::EpochReport& r);
  bool diverged() const { return !why_.empty(); }
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

/// Fault injection for the tests of the signal paths: ATTNLAB_TEST_SIGNAL_AT=<point> sends this
/// process SIGTERM at that point ("results_created": just after the results file is created;
/// "evaluate_split": as the split evaluation starts), where a real signal's timing is a race.
void test_signal_at(const char* point);

/// Tests of torchrun restarts: ATTNLAB_TEST_RANK_EXIT_AT_EPOCH=N makes a rank other than 0 of the
/// first attempt (TORCHELASTIC_RESTART_COUNT=0) die after epoch N, as a crashed worker would.
void test_exit_at_epoch(int64_t epoch);

}  // namespace attnlab::run
