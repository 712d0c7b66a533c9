// Statistics of `moetier bench` (the users' measurement method): per-test summaries of the
// repetitions' t/s, drift between the first and the second half of the rounds, and the
// ratio of two tests' means with a 95% confidence interval. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace moetier::bench {

// Mean, sample standard deviation (n - 1; 0 for one sample), extremes and coefficient of
// variation (sd / mean; 0 when the mean is 0) of a sample.
struct Summary {
  int64_t n = 0;
  double mean = 0, sd = 0, min = 0, max = 0, cv = 0;
};
Summary summarize(std::span<const double> samples);

// The users' noise threshold: a coefficient of variation above 5% makes a test's mean
// too uncertain for the ~5% differences they compare.
inline constexpr double kNoisyCv = 0.05;

// Drift over the rounds in percent: (mean of the second half - mean of the first half) /
// mean of the first half × 100, the halves being the first and last floor(n/2) samples in
// the order they were taken (with odd n the middle one belongs to neither). nullopt for
// fewer than 2 samples or a zero first half.
std::optional<double> drift_percent(std::span<const double> samples_in_order);

// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom (df > 0, not
// necessarily whole: Welch's df is not), by bisection on the t CDF computed from the
// regularized incomplete beta function. Accurate to ~1e-9.
double student_t_975(double df);

// Ratio of means b / a with a 95% confidence interval (Welch t interval on the log ratio,
// delta method):
//   R = mean_b / mean_a,  u_x = sd_x^2 / (n_x mean_x^2)  (squared relative standard errors),
//   se(ln R) ≈ sqrt(u_a + u_b),
//   df = (u_a + u_b)^2 / (u_a^2 / (n_a - 1) + u_b^2 / (n_b - 1))   (Welch–Satterthwaite),
//   CI = R · exp(± t_{0.975, df} se(ln R)).
// On the log scale because a ratio of speeds is positive and its error multiplicative: the
// interval never reaches 0 or below however noisy the runs (the linear form did), and a
// ratio and its inverse get mirrored intervals. Chosen over a bootstrap because with the
// users' 5 repetitions a percentile bootstrap is known to be too narrow, and this has a
// closed form. nullopt when either side has fewer than 2 samples or a mean of 0. With both
// sds 0 the interval is [R, R].
struct RatioCi {
  double ratio = 0, low = 0, high = 0;
  double df = 0;  // Welch's degrees of freedom (infinite when both sds are 0)
  bool includes_one() const { return low <= 1.0 && 1.0 <= high; }
};
std::optional<RatioCi> ratio_ci(const Summary& a, const Summary& b);

}  // namespace moetier::bench
