#include "run/progress.hpp"

#include <fmt/format.h>

#include <iostream>

namespace attnlab::run {

namespace {
std::string hms(double s) {
  auto t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}
}  // namespace

void Progress::epoch(const train::EpochReport& r) {
  elapsed_ += r.seconds;
  ++epochs_;
  if (quiet_) return;
  auto get = [](const std::map<std::string, double>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::optional<double>{} : std::optional<double>{it->second};
  };
  // A trainer that counts steps (lm with max_steps) reports every so many steps, not every epoch.
  const auto step = get(r.train, "step");
  const char* unit = step ? "report" : "epoch";
  std::string line = fmt::format("{} {:>{}}/{}", unit, r.epoch, fmt::formatted_size("{}", max_epochs_), max_epochs_);
  if (step) line += fmt::format("  step {:.0f}", *step);
  if (auto v = get(r.train, "loss")) line += fmt::format("  train loss {:.4f}", *v);
  if (auto v = get(r.val, "loss")) line += fmt::format("  val loss {:.4f}", *v);
  if (auto v = get(r.val, "perplexity")) line += fmt::format(" (ppl {:.2f})", *v);
  if (auto v = get(r.val, "bleu")) line += fmt::format("  val BLEU {:.2f}", *v);
  if (auto v = get(r.train, "tokens_per_s")) line += fmt::format("  {:.0f} tok/s", *v);
  // Per epoch of this process: a resumed run's first report is epoch N+1, not its first epoch.
  const double per_epoch = elapsed_ / static_cast<double>(epochs_);
  const double eta = per_epoch * static_cast<double>(max_epochs_ - r.epoch);
  line += fmt::format("  {:.2f}s/{}  elapsed {}  ETA {}", r.seconds, unit, hms(elapsed_), hms(eta));
  std::cout << line << std::endl;
}

}  // namespace attnlab::run
