// The stop flag, signals, divergence and the tests' fault injection (run/lifecycle.hpp).
#include "run/lifecycle.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdlib>

namespace attnlab::run {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};

}  // namespace

std::atomic<bool>& stop_flag() { return g_stop; }

SignalScope::SignalScope() {
  g_stop.store(false);
  for (size_t i = 0; i < kSignals.size(); ++i) old_[i] = std::signal(kSignals[i], on_signal);
}

SignalScope::~SignalScope() {
  for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], old_[i]);
}

void throw_if_stopped(const char* phase) {
  if (g_stop.load()) throw Interrupted(fmt::format("interrupted during {}", phase));
}

void DivergenceWatch::epoch(const train::EpochReport& r) {
  if (!why_.empty()) return;
  for (const auto* group : {&r.train, &r.val}) {
    for (const auto& [name, value] : *group) {
      if (name.ends_with("loss") && !std::isfinite(value)) {
        why_ = fmt::format("{} {} is {} at epoch {}", group == &r.train ? "train" : "val", name, value, r.epoch);
        g_stop.store(true);
        return;
      }
    }
  }
}

void test_signal_at(const char* point) {
  const char* at = std::getenv("ATTNLAB_TEST_SIGNAL_AT");
  if (at != nullptr && std::string(at) == point) std::raise(SIGTERM);
}

void test_exit_at_epoch(int64_t epoch) {
  const char* at = std::getenv("ATTNLAB_TEST_RANK_EXIT_AT_EPOCH");
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (at != nullptr && attempt != nullptr && std::string(attempt) == "0" && std::to_string(epoch) == at) {
    std::_Exit(3);
  }
}

}  // namespace attnlab::run
