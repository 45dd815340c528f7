// The plots' log axes (runner plot, runner compare --plot): every panel carries readable ticks,
// also when its values stay within one decade (issue 16).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tools/plot/axes.hpp"

namespace {
using attnlab::tools::plot::log_ticks;

TEST(LogAxis, ManyDecadesGetOneTickPerDecade) {
  const auto [ticks, labels] = log_ticks(std::log10(0.002), std::log10(30.0));
  EXPECT_EQ(labels, (std::vector<std::string>{"0.01", "0.1", "1", "10"}));
}

TEST(LogAxis, OneToTwoDecadesGetOneTwoFiveSteps) {
  const auto [ticks, labels] = log_ticks(std::log10(0.15), std::log10(3.0));
  EXPECT_EQ(labels, (std::vector<std::string>{"0.2", "0.5", "1", "2"}));
}

TEST(LogAxis, WithinOneDecadeStillHasReadableTicks) {
  // A loss from 0.31 to 0.45: no 1-2-5 value inside; before the fix the panel had no tick at all.
  for (const auto& [lo, hi] : {std::pair{0.31, 0.45}, std::pair{0.0571, 0.0589}, std::pair{2.2, 2.9},
                               std::pair{6.5, 9.5}, std::pair{1234.0, 1500.0}}) {
    const auto [ticks, labels] = log_ticks(std::log10(lo), std::log10(hi));
    ASSERT_GE(ticks.size(), 2u) << lo << ".." << hi;
    ASSERT_EQ(ticks.size(), labels.size());
    for (size_t i = 0; i < ticks.size(); ++i) {
      const double v = std::pow(10.0, ticks[i]);
      EXPECT_GE(v, lo * (1 - 1e-9)) << labels[i];
      EXPECT_LE(v, hi * (1 + 1e-9)) << labels[i];
      // The label is the value at the tick, written exactly enough to tell the ticks apart.
      EXPECT_NEAR(std::stod(labels[i]), v, 1e-9 * v) << labels[i];
      if (i > 0) {
        EXPECT_NE(labels[i], labels[i - 1]);
      }
    }
  }
  const auto [ticks, labels] = log_ticks(std::log10(0.31), std::log10(0.45));
  EXPECT_EQ(labels, (std::vector<std::string>{"0.35", "0.40", "0.45"}));
}

}  // namespace
