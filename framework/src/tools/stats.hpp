#pragma once
// Statistics of a sample and of two: what `runner compare --group-by` prints per group and, for
// two groups, Welch's t-test and Hedges' g. Pure functions (tests/tools_stats_test.cpp); the values
// are checked against numpy and scipy on real results files by tests/python/group_check.py.
#include <cstddef>
#include <vector>

namespace attnlab::tools::stats {

struct Describe {
  size_t n = 0;
  double mean = 0, sd = 0, min = 0, max = 0;  // sd: sample standard deviation (n - 1); NaN for n < 2
};
/// n, mean, sample sd (numpy's std(ddof=1)), min and max. All NaN (n = 0) for an empty sample.
Describe describe(const std::vector<double>& x);

struct Welch {
  double t = 0, df = 0, p = 0;  // NaN when either group has fewer than 2 values or both sds are 0
};
/// Welch's unequal-variance t-test of mean(a) = mean(b), two-sided: scipy's
/// ttest_ind(a, b, equal_var=False). df by Welch–Satterthwaite.
Welch welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

/// Hedges' g: Cohen's d of a - b with the pooled sample sd, times the small-sample correction
/// 1 - 3 / (4 (na + nb) - 9). NaN when na + nb < 3 or the pooled sd is 0.
double hedges_g(const std::vector<double>& a, const std::vector<double>& b);

/// The regularized incomplete beta function I_x(a, b) (Numerical Recipes' continued fraction,
/// evaluated by the modified Lentz method in double precision).
double incomplete_beta(double a, double b, double x);

/// P(|T| >= |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2).
double t_two_sided_p(double t, double df);

}  // namespace attnlab::tools::stats
