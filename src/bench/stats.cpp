#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moetier::bench {

Summary summarize(std::span<const double> v) {
  Summary s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);  // two-pass: no cancellation
    s.sd = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  s.cv = s.mean != 0 ? s.sd / std::abs(s.mean) : 0;
  return s;
}

std::optional<double> drift_percent(std::span<const double> v) {
  const size_t half = v.size() / 2;
  if (half == 0) return std::nullopt;
  double first = 0, second = 0;
  for (size_t i = 0; i < half; ++i) {
    first += v[i];
    second += v[v.size() - half + i];
  }
  if (first == 0) return std::nullopt;
  return 100.0 * (second - first) / first;  // the halves have the same count: sums compare as means
}

namespace {

// Continued fraction of the regularized incomplete beta I_x(a, b) (modified Lentz's
// method), valid for x < (a + 1) / (a + b + 2); the caller uses the symmetry otherwise.
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-15;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double f = d;
  for (int m = 1; m <= 500; ++m) {
    const double md = m;
    // Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
    double num = md * (b - md) * x / ((a + 2 * md - 1) * (a + 2 * md));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (std::abs(d) < kTiny) d = kTiny;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    f *= d * c;
    // Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    num = -(a + md) * (a + b + md) * x / ((a + 2 * md) * (a + 2 * md + 1));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (std::abs(d) < kTiny) d = kTiny;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    f *= delta;
    if (std::abs(delta - 1.0) < kEps) break;
  }
  return f;
}

// I_x(a, b) = x^a (1-x)^b / (a B(a, b)) × continued fraction.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * beta_continued_fraction(b, a, 1.0 - x) / b;
}

// P(|T| > t) for Student's t with df degrees of freedom: I_{df/(df+t²)}(df/2, 1/2).
double t_two_sided_tail(double t, double df) { return incomplete_beta(df / 2, 0.5, df / (df + t * t)); }

}  // namespace

double student_t_975(double df) {
  if (!(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(df) || df > 1e7) return 1.959963984540054;  // the normal quantile
  // The two-sided tail falls monotonically in t; 12.706 at df = 1 is the largest quantile for
  // df >= 1, and smaller df need larger t: grow the bracket until it holds the answer.
  double lo = 0, hi = 16;
  while (t_two_sided_tail(hi, df) > 0.05) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (t_two_sided_tail(mid, df) > 0.05 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::optional<RatioCi> ratio_ci(const Summary& a, const Summary& b) {
  if (a.n < 2 || b.n < 2 || a.mean == 0 || b.mean == 0) return std::nullopt;
  RatioCi r;
  r.ratio = b.mean / a.mean;
  const double ua = a.sd * a.sd / (static_cast<double>(a.n) * a.mean * a.mean);
  const double ub = b.sd * b.sd / (static_cast<double>(b.n) * b.mean * b.mean);
  const double u = ua + ub;
  if (u == 0) {
    r.low = r.high = r.ratio;
    r.df = std::numeric_limits<double>::infinity();
    return r;
  }
  r.df = u * u / (ua * ua / static_cast<double>(a.n - 1) + ub * ub / static_cast<double>(b.n - 1));
  const double half_width = student_t_975(r.df) * std::sqrt(u);  // on ln R
  r.low = r.ratio * std::exp(-half_width);
  r.high = r.ratio * std::exp(half_width);
  return r;
}

}  // namespace moetier::bench
