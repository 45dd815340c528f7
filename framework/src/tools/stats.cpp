#include "tools/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnlab::tools::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The continued fraction of I_x(a, b) (Numerical Recipes 6.4, betacf), modified Lentz method.
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIterations = 10000;
  constexpr double kEps = 1e-16, kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

double mean_of(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

/// Sample variance (n - 1), two-pass.
double variance_of(const std::vector<double>& x, double mean) {
  double s = 0;
  for (double v : x) s += (v - mean) * (v - mean);
  return s / static_cast<double>(x.size() - 1);
}

}  // namespace

Describe describe(const std::vector<double>& x) {
  Describe d;
  d.n = x.size();
  if (x.empty()) {
    d.mean = d.sd = d.min = d.max = kNaN;
    return d;
  }
  d.mean = mean_of(x);
  d.sd = x.size() < 2 ? kNaN : std::sqrt(variance_of(x, d.mean));
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  d.min = *lo;
  d.max = *hi;
  return d;
}

double incomplete_beta(double a, double b, double x) {
  if (!(x >= 0 && x <= 1) || !(a > 0) || !(b > 0)) return kNaN;
  if (x == 0 || x == 1) return x;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  // The fraction converges fast for x < (a + 1) / (a + b + 2); beyond, use I_x(a, b) = 1 - I_{1-x}(b, a).
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double t_two_sided_p(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return 0;
  return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

Welch welch_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  Welch w{kNaN, kNaN, kNaN};
  if (a.size() < 2 || b.size() < 2) return w;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double ma = mean_of(a), mb = mean_of(b);
  const double va = variance_of(a, ma) / na, vb = variance_of(b, mb) / nb;  // squared standard errors
  if (va + vb == 0) return w;
  w.t = (ma - mb) / std::sqrt(va + vb);
  w.df = (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
  w.p = t_two_sided_p(w.t, w.df);
  return w;
}

double hedges_g(const std::vector<double>& a, const std::vector<double>& b) {
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  if (a.empty() || b.empty() || na + nb < 3) return kNaN;
  const double ma = mean_of(a), mb = mean_of(b);
  const double ssa = a.size() < 2 ? 0 : variance_of(a, ma) * (na - 1);
  const double ssb = b.size() < 2 ? 0 : variance_of(b, mb) * (nb - 1);
  const double pooled = std::sqrt((ssa + ssb) / (na + nb - 2));
  if (pooled == 0) return kNaN;
  return (ma - mb) / pooled * (1 - 3 / (4 * (na + nb) - 9));
}

}  // namespace attnlab::tools::stats
