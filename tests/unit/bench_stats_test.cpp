// The measurement method of `moetier bench` as pure functions: statistics against
// hand-computed cases, the interleaved repetition order and which tests are compared.
#include <gtest/gtest.h>

#include "support/bench_args.h"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "bench/bench_params.h"
#include "bench/configs.h"
#include "bench/stats.h"

namespace moetier::bench {
namespace {

TEST(BenchStats, SummaryOfFiveSamples) {
  // 1..5: mean 3, squared deviations 4+1+0+1+4 = 10, sd = sqrt(10/4), cv = sd/3.
  const std::vector<double> v = {3, 1, 4, 5, 2};
  const Summary s = summarize(v);
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.sd, std::sqrt(2.5));
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.cv, std::sqrt(2.5) / 3.0);
  const Summary one = summarize(std::vector<double>{7});
  EXPECT_EQ(one.sd, 0.0);
  EXPECT_EQ(one.cv, 0.0);
  EXPECT_EQ(summarize(std::vector<double>{}).n, 0);
}

TEST(BenchStats, DriftComparesTheHalvesInOrder) {
  // 5 samples: first two (mean 1.5) against the last two (mean 4.5), the middle one in neither.
  EXPECT_DOUBLE_EQ(*drift_percent(std::vector<double>{1, 2, 100, 4, 5}), 200.0);
  EXPECT_DOUBLE_EQ(*drift_percent(std::vector<double>{10, 10, 9, 9}), -10.0);
  EXPECT_DOUBLE_EQ(*drift_percent(std::vector<double>{8, 8}), 0.0);
  EXPECT_FALSE(drift_percent(std::vector<double>{8}).has_value());
}

TEST(BenchStats, StudentTQuantiles) {
  // Closed forms: df = 1 is Cauchy, t = tan(0.475 pi); df = 2: t = (2p - 1) / sqrt(2 p (1 - p)).
  EXPECT_NEAR(student_t_975(1), std::tan(0.475 * std::numbers::pi), 1e-8);
  EXPECT_NEAR(student_t_975(2), 0.95 / std::sqrt(2 * 0.975 * 0.025), 1e-8);
  // Table values (any statistics book, 6 decimals).
  EXPECT_NEAR(student_t_975(4), 2.776445, 1e-6);
  EXPECT_NEAR(student_t_975(8), 2.306004, 1e-6);
  EXPECT_NEAR(student_t_975(10), 2.228139, 1e-6);
  EXPECT_NEAR(student_t_975(30), 2.042272, 1e-6);
  EXPECT_NEAR(student_t_975(1e9), 1.959964, 1e-6);
  // Welch's df is not whole: the quantile falls strictly between its neighbours.
  EXPECT_LT(student_t_975(2.5), student_t_975(2));
  EXPECT_GT(student_t_975(2.5), student_t_975(3));
  EXPECT_GT(student_t_975(0.5), student_t_975(1));
}

TEST(BenchStats, RatioIntervalByHand) {
  // a: n 5, mean 100, sd 2; b: n 5, mean 110, sd 2.2. u_a = 4 / (5 * 100^2) = 8e-5,
  // u_b = 4.84 / (5 * 110^2) = 8e-5; df = (1.6e-4)^2 / (2 * (8e-5)^2 / 4) = 8; t(8) = 2.306004;
  // R = 1.1, se = 1.1 * sqrt(1.6e-4) = 0.0139140; half width = 0.0320858.
  const Summary a{.n = 5, .mean = 100, .sd = 2, .min = 0, .max = 0, .cv = 0};
  const Summary b{.n = 5, .mean = 110, .sd = 2.2, .min = 0, .max = 0, .cv = 0};
  const auto r = ratio_ci(a, b);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->ratio, 1.1);
  EXPECT_NEAR(r->df, 8.0, 1e-9);
  // t(0.975, 8) = 2.306004, se(ln R) = sqrt(2 · 8e-5): R · exp(∓0.0291683).
  EXPECT_NEAR(r->low, 1.0683776, 1e-6);
  EXPECT_NEAR(r->high, 1.1325583, 1e-6);
  EXPECT_FALSE(r->includes_one());
  // Means 1% apart with 5% noise: the interval holds 1 ("no difference").
  const Summary c{.n = 5, .mean = 101, .sd = 5, .min = 0, .max = 0, .cv = 0};
  ASSERT_TRUE(ratio_ci(a, c).has_value());
  EXPECT_TRUE(ratio_ci(a, c)->includes_one());
  // No spread: a point interval; one sample: no interval.
  const Summary exact{.n = 3, .mean = 50, .sd = 0, .min = 0, .max = 0, .cv = 0};
  EXPECT_DOUBLE_EQ(ratio_ci(exact, exact)->low, 1.0);
  EXPECT_FALSE(ratio_ci(Summary{.n = 1, .mean = 5, .sd = 0, .min = 0, .max = 0, .cv = 0}, a).has_value());
}

TEST(BenchSchedule, InterleavedOrderIsRoundRobin) {
  const std::vector<Slot> inter = repetition_order(3, 2, true);
  const std::vector<Slot> want_inter = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}};
  EXPECT_EQ(inter, want_inter);
  const std::vector<Slot> row = repetition_order(3, 2, false);
  const std::vector<Slot> want_row = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}};
  EXPECT_EQ(row, want_row);
  EXPECT_TRUE(repetition_order(0, 5, true).empty());
}

using testing::tests_of;

TEST(BenchConfigs, ConfigurationsSweptKnobsAndComparisons) {
  // -t 1,2 with pp and tg: two configurations that differ in n_threads only.
  const auto tests = tests_of({"-p", "8", "-n", "4", "-t", "1,2"});
  ASSERT_EQ(tests.size(), 4u);
  EXPECT_EQ(configuration_of(tests), (std::vector<size_t>{0, 0, 1, 1}));
  EXPECT_EQ(swept_knobs(tests), (std::vector<std::string>{"n_threads"}));
  auto pairs = plan_comparisons(tests, false);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].a, 0u);
  EXPECT_EQ(pairs[0].b, 2u);  // pp8 t=1 against pp8 t=2
  EXPECT_EQ(pairs[1].a, 1u);
  EXPECT_EQ(pairs[1].b, 3u);
  EXPECT_EQ(pairs[0].what, "n_threads 1 -> 2");
  // The depth is a knob, not part of the kind: tg4 @ d0 against tg4 @ d16.
  const auto depth = tests_of({"-p", "0", "-n", "4", "-d", "0,16"});
  ASSERT_EQ(plan_comparisons(depth, false).size(), 1u);
  EXPECT_EQ(test_kind(depth[1]), "tg4");
  // One configuration, three, or two differing in two knobs: nothing unless --compare.
  EXPECT_TRUE(plan_comparisons(tests_of({"-p", "8", "-n", "4"}), false).empty());
  const auto three = tests_of({"-p", "0", "-n", "4", "-ctk", "f16,q8_0,q4_0"});
  EXPECT_TRUE(plan_comparisons(three, false).empty());
  const auto forced = plan_comparisons(three, true);
  ASSERT_EQ(forced.size(), 2u);  // q8_0 and q4_0 against f16
  EXPECT_EQ(forced[1].what, "type_k f16 -> q4_0");
  const auto two_knobs = tests_of({"-p", "0", "-n", "4", "-t", "1,2", "-d", "0,16"});
  EXPECT_EQ(count_configurations(two_knobs), 4u);
  EXPECT_TRUE(plan_comparisons(two_knobs, false).empty());
}

}  // namespace
}  // namespace moetier::bench
