// The progress line: a resumed run's ETA counts the epochs this process trained, not the epoch
// number it resumed at.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "run/progress.hpp"

namespace {
using attnlab::train::EpochReport;
using attnlab::run::Progress;

std::string lines_of(Progress& p, int64_t first, int64_t last, double seconds) {
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  for (int64_t e = first; e <= last; ++e)
    p.epoch({.epoch = e, .train = {{"loss", 1.5}}, .val = {}, .seconds = seconds});
  std::cout.rdbuf(old);
  return captured.str();
}

TEST(Progress, EtaIsTheMeanEpochTimesTheEpochsLeft) {
  Progress p(10, /*quiet=*/false);
  const auto out = lines_of(p, 1, 2, 30.0);
  EXPECT_NE(out.find("epoch  1/10  train loss 1.5000  30.00s/epoch  elapsed 0:30  ETA 4:30"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch  2/10  train loss 1.5000  30.00s/epoch  elapsed 1:00  ETA 4:00"), std::string::npos) << out;
}

TEST(Progress, AResumedRunsEtaCountsTheEpochsItTrained) {
  Progress p(100, /*quiet=*/false);
  const auto out = lines_of(p, 45, 46, 50.0);  // resumed after epoch 44
  EXPECT_NE(out.find("epoch  45/100  train loss 1.5000  50.00s/epoch  elapsed 0:50  ETA 45:50"), std::string::npos)
      << out;
  EXPECT_NE(out.find("epoch  46/100  train loss 1.5000  50.00s/epoch  elapsed 1:40  ETA 45:00"), std::string::npos)
      << out;
}

TEST(Progress, AStepCountingRunSaysReportsAndSteps) {
  Progress p(10, /*quiet=*/false);
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  p.epoch({.epoch = 2,
           .train = {{"loss", 1.5}, {"step", 400}},
           .val = {{"loss", 1.25}, {"perplexity", 3.4903}},
           .seconds = 20.0});
  std::cout.rdbuf(old);
  EXPECT_NE(captured.str().find("report  2/10  step 400  train loss 1.5000  val loss 1.2500 (ppl 3.49)  20.00s/report"),
            std::string::npos)
      << captured.str();
}

TEST(Progress, QuietPrintsNothing) {
  Progress p(5, /*quiet=*/true);
  EXPECT_EQ(lines_of(p, 1, 5, 1.0), "");
}

}  // namespace
