// What `moetier bench` varies between its tests: the knobs of a test (every parameter but
// the test kind), the configurations (tests with the same knobs), which knob is swept, the
// order repetitions run in (interleaved or not), and which tests to compare. Pure functions
// of the test list, so the order and the pairing are unit-tested without running anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_params.h"

namespace moetier::bench {

// One parameter of a test as the records spell it: "n_threads" = "2" (numeric 2).
struct Knob {
  std::string name;
  std::string text;
  std::optional<double> numeric;  // for numeric knobs (a chart's x axis)
};

// The knobs of a test in llama-bench's loop order (model first, n_depth last).
std::vector<Knob> test_knobs(const TestSpec& test);

// The kind of a test, which is not a knob: "pp512", "tg128", "pp512+tg128", "tg16 greedy",
// ... (test_name without the depth).
std::string test_kind(const TestSpec& test);

// configuration[i]: index of test i's configuration, numbered in order of first appearance.
std::vector<size_t> configuration_of(const std::vector<TestSpec>& tests);
size_t count_configurations(const std::vector<TestSpec>& tests);

// Knob names whose value differs between some configurations ("swept"), in knob order.
std::vector<std::string> swept_knobs(const std::vector<TestSpec>& tests);

// One timed repetition to run: test index and repetition number.
struct Slot {
  size_t test = 0;
  int64_t repetition = 0;
  bool operator==(const Slot&) const = default;
};

// The order of the timed repetitions of `n_tests` tests with `repetitions` each.
// interleave: round-robin, round r runs repetition r of every test in test order (drift
// over time hits every test alike); otherwise all repetitions of test 0, then of test 1, ...
std::vector<Slot> repetition_order(size_t n_tests, int64_t repetitions, bool interleave);

// A comparison of two tests of the same kind: b against a (ratio = mean_b / mean_a).
struct ComparisonPair {
  size_t a = 0, b = 0;        // test indices
  std::string what;           // "n_threads 1 -> 2" (the knobs that differ)
};

// Which tests to compare: with `force` (--compare) every configuration against the first,
// else only when there are exactly two configurations and they differ in one knob; in both
// cases per test kind present in both configurations, in test order.
std::vector<ComparisonPair> plan_comparisons(const std::vector<TestSpec>& tests, bool force);

}  // namespace moetier::bench
