#pragma once
// One progress line per epoch: losses, tokens/s, elapsed and ETA.
#include <attnlab/train/trainer.hpp>

#include <chrono>

namespace attnlab::run {

class Progress {
 public:
  Progress(int64_t max_epochs, bool quiet) : max_epochs_(max_epochs), quiet_(quiet) {}
  void epoch(const train::EpochReport& r);

 private:
  int64_t max_epochs_;
  bool quiet_;
  double elapsed_ = 0.0;  // seconds of the epochs reported by this process
  int64_t epochs_ = 0;    // how many it reported (a resumed run starts after its checkpoint)
};

}  // namespace attnlab::run
