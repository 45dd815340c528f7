// compare --group-by's statistics (framework/src/cli/stats.cpp) against closed forms: I_x(a, 1) =
// x^a, I_x(1, b) = 1 - (1 - x)^b, Student's t with 1 and 2 degrees of freedom (Cauchy; 1 -
// |t| / sqrt(2 + t^2)), and the sample statistics by their definitions. numpy and scipy on real
// results files: tests/python/group_check.py (ctest python.group_check).
#include "tools/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace {
using namespace attnlab::tools::stats;

TEST(Stats, IncompleteBetaClosedForms) {
  for (double x : {0.0, 1e-6, 0.1, 0.37, 0.5, 0.9, 0.999999, 1.0}) {
    for (double a : {0.5, 1.0, 2.5, 7.0, 40.0}) {
      EXPECT_NEAR(incomplete_beta(a, 1, x), std::pow(x, a), 1e-13) << "a " << a << " x " << x;
      EXPECT_NEAR(incomplete_beta(1, a, x), 1 - std::pow(1 - x, a), 1e-13) << "b " << a << " x " << x;
      // Symmetry: I_x(a, b) = 1 - I_{1-x}(b, a).
      EXPECT_NEAR(incomplete_beta(a, 3.5, x), 1 - incomplete_beta(3.5, a, 1 - x), 1e-13);
    }
  }
  EXPECT_TRUE(std::isnan(incomplete_beta(1, 1, 1.5)));
  EXPECT_TRUE(std::isnan(incomplete_beta(0, 1, 0.5)));
}

TEST(Stats, StudentTTwoSidedP) {
  for (double t : {0.0, 0.3, 1.0, 2.5, 12.0, 1e4}) {
    EXPECT_NEAR(t_two_sided_p(t, 1), 1 - 2 * std::atan(t) / std::numbers::pi, 1e-13) << t;
    EXPECT_NEAR(t_two_sided_p(-t, 2), 1 - t / std::sqrt(2 + t * t), 1e-13) << t;
  }
  EXPECT_EQ(t_two_sided_p(INFINITY, 3), 0);
  EXPECT_TRUE(std::isnan(t_two_sided_p(NAN, 3)));
  // Large df tends to the normal: P(|Z| >= 1.959963984540054) = 0.05 (t with 1e6 df is within 1e-7).
  EXPECT_NEAR(t_two_sided_p(1.959963984540054, 1e6), 0.05, 1e-6);
}

TEST(Stats, DescribeIsSampleStatistics) {
  auto d = describe({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(d.n, 8u);
  EXPECT_DOUBLE_EQ(d.mean, 5);
  EXPECT_DOUBLE_EQ(d.sd, std::sqrt(32.0 / 7));  // sum of squares 32, n - 1 = 7
  EXPECT_EQ(d.min, 2);
  EXPECT_EQ(d.max, 9);
  EXPECT_TRUE(std::isnan(describe({3}).sd));
  EXPECT_TRUE(std::isnan(describe({}).mean));
}

TEST(Stats, WelchAndHedgesByDefinition) {
  const std::vector<double> a{1, 2, 3, 4}, b{2, 4, 6};
  // a: mean 2.5, var 5/3; b: mean 4, var 4. se^2 = 5/12 + 4/3 = 7/4.
  const auto w = welch_t_test(a, b);
  EXPECT_DOUBLE_EQ(w.t, -1.5 / std::sqrt(1.75));
  const double df = 1.75 * 1.75 / ((5.0 / 12) * (5.0 / 12) / 3 + (4.0 / 3) * (4.0 / 3) / 2);
  EXPECT_DOUBLE_EQ(w.df, df);
  EXPECT_DOUBLE_EQ(w.p, t_two_sided_p(w.t, df));
  // pooled sd sqrt((5 + 8) / 5); J = 1 - 3 / 19.
  EXPECT_DOUBLE_EQ(hedges_g(a, b), -1.5 / std::sqrt(13.0 / 5) * (1 - 3.0 / 19));
  EXPECT_TRUE(std::isnan(welch_t_test({1}, b).p));
  EXPECT_TRUE(std::isnan(welch_t_test({1, 1}, {2, 2}).p));
  EXPECT_TRUE(std::isnan(hedges_g({1, 1}, {1, 1})));
}

}  // namespace
