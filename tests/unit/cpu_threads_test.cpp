// engine/cpu_threads.h: the pool's threads and CPUs chosen from made-up machines (hybrid
// laptops, SMT on and off, restricted affinity), the mask flags' parsing, the load line.
#include "engine/cpu_threads.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace moetier {
namespace {

using platform::CpuTopology;

std::vector<int> range(int lo, int hi) {  // [lo, hi]
  std::vector<int> v(static_cast<size_t>(hi - lo + 1));
  std::iota(v.begin(), v.end(), lo);
  return v;
}

// `smt_cores` cores with two adjacent CPUs each (0-1, 2-3, ...), then `single_cores` with one.
CpuTopology machine(int smt_cores, int single_cores, bool hybrid) {
  CpuTopology t;
  int cpu = 0;
  for (int c = 0; c < smt_cores; ++c, cpu += 2) t.cores.push_back({cpu, cpu + 1});
  const int first_single = cpu;
  for (int c = 0; c < single_cores; ++c, ++cpu) t.cores.push_back({cpu});
  t.logical = cpu;
  t.physical = smt_cores + single_cores;
  if (hybrid) {
    t.performance = range(0, first_single - 1);
    t.efficiency = range(first_single, cpu - 1);
  }
  return t;
}

CpuThreads choose(const CpuTopology& t, const std::vector<int>& usable, CpuThreadsRequest r = {}) {
  auto c = choose_cpu_threads(t, usable, r);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? *c : CpuThreads{};
}

TEST(CpuThreads, HybridLaptopDecodesOnePerPerformanceCore) {
  // i7-13620H: 6 P-cores with SMT (CPUs 0-11), 4 E-cores (12-15).
  const CpuTopology t = machine(6, 4, true);
  const CpuThreads c = choose(t, range(0, 15));
  EXPECT_EQ(c.threads, 6);
  EXPECT_EQ(c.kind, CoreKind::kPerformance);
  EXPECT_EQ(c.cpus, range(0, 11));
  EXPECT_EQ(c.cores, 6);
  EXPECT_EQ(c.efficiency_unused, 4);
  EXPECT_TRUE(c.pin);
  EXPECT_TRUE(c.hybrid);
  EXPECT_TRUE(c.thread_cpus.empty());
  EXPECT_EQ(describe_cpu_threads(c),
            "threads: 6 on the 6 performance cores (CPUs 0-11; 4 efficiency cores unused; -t/--cpu-mask override)");
  // Unknown usable CPUs: the same (every online CPU counts).
  EXPECT_EQ(choose(t, {}).cpus, range(0, 11));
}

TEST(CpuThreads, TwelveCoreHybridWithEightEfficiencyCores) {
  // i7-12700H-like 6P+8E: CPUs 0-11 are the P-cores' threads, 12-19 the E-cores.
  const CpuTopology t = machine(6, 8, true);
  const CpuThreads c = choose(t, range(0, 19));
  EXPECT_EQ(c.threads, 6);
  EXPECT_EQ(c.efficiency_unused, 8);
  EXPECT_EQ(c.cpus, range(0, 11));
}

TEST(CpuThreads, HybridWithSmtOff) {
  // SMT off: the P-cores' second threads are offline; every core has one CPU.
  CpuTopology t;
  t.logical = 10;
  t.physical = 10;
  for (int c = 0; c < 6; ++c) t.cores.push_back({2 * c});
  for (int c = 12; c < 16; ++c) t.cores.push_back({c});
  t.performance = {0, 2, 4, 6, 8, 10};
  t.efficiency = range(12, 15);
  const std::vector<int> usable = {0, 2, 4, 6, 8, 10, 12, 13, 14, 15};
  const CpuThreads c = choose(t, usable);
  EXPECT_EQ(c.threads, 6);
  EXPECT_EQ(c.cpus, (std::vector<int>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(c.efficiency_unused, 4);
}

TEST(CpuThreads, HybridPmuListingOfflineCpusIsCutToTheUsableOnes) {
  // A PMU list may name CPUs that are offline or outside the cpuset: only usable ones count.
  CpuTopology t = machine(6, 4, true);
  const CpuThreads c = choose(t, {0, 1, 2, 3, 12, 13});
  EXPECT_EQ(c.threads, 2);
  EXPECT_EQ(c.cpus, range(0, 3));
  EXPECT_EQ(c.efficiency_unused, 2);
}

TEST(CpuThreads, HybridRestrictedToOneKindIsNotHybrid) {
  const CpuTopology t = machine(6, 4, true);
  // taskset to the E-cores: use them all, pin nothing (the affinity already holds).
  CpuThreads e = choose(t, range(12, 15));
  EXPECT_EQ(e.kind, CoreKind::kAll);
  EXPECT_EQ(e.threads, 4);
  EXPECT_FALSE(e.pin);
  EXPECT_FALSE(e.hybrid);
  // taskset to three P-cores.
  CpuThreads p = choose(t, range(0, 5));
  EXPECT_EQ(p.threads, 3);
  EXPECT_FALSE(p.pin);
  EXPECT_EQ(describe_cpu_threads(p), "threads: 3 (3 cores)");
}

TEST(CpuThreads, ThreadCountOnAHybridCpu) {
  const CpuTopology t = machine(6, 4, true);
  // Up to the P-cores' logical CPUs: still there.
  CpuThreads c = choose(t, range(0, 15), {.threads = 12});
  EXPECT_EQ(c.threads, 12);
  EXPECT_EQ(c.kind, CoreKind::kPerformance);
  EXPECT_TRUE(c.pin);
  // More: every CPU, unpinned.
  c = choose(t, range(0, 15), {.threads = 16});
  EXPECT_EQ(c.threads, 16);
  EXPECT_EQ(c.kind, CoreKind::kAll);
  EXPECT_FALSE(c.pin);
  EXPECT_EQ(c.efficiency_unused, 0);
  EXPECT_EQ(describe_cpu_threads(c), "threads: 16 on all 10 cores, performance and efficiency (CPUs 0-15)");
}

TEST(CpuThreads, NonHybridIsAllPhysicalCoresUnpinned) {
  // 8 cores with SMT: today's default (physical cores), nothing pinned.
  const CpuTopology smt = machine(8, 0, false);
  CpuThreads c = choose(smt, range(0, 15));
  EXPECT_EQ(c.threads, 8);
  EXPECT_EQ(c.kind, CoreKind::kAll);
  EXPECT_FALSE(c.pin);
  EXPECT_FALSE(c.hybrid);
  EXPECT_EQ(describe_cpu_threads(c), "threads: 8 (8 cores)");
  // Without SMT.
  const CpuTopology plain = machine(0, 2, false);
  EXPECT_EQ(choose(plain, range(0, 1)).threads, 2);
  // Affinity to 3 CPUs of two cores (cgroup cpuset 0-2): two cores.
  c = choose(smt, range(0, 2));
  EXPECT_EQ(c.threads, 2);
  EXPECT_EQ(c.cpus, range(0, 2));
  EXPECT_FALSE(c.pin);
  // -t wins.
  EXPECT_EQ(choose(smt, range(0, 15), {.threads = 3}).threads, 3);
}

TEST(CpuThreads, WithoutCoreInformationTheCoreRatioIsUsed) {
  // arm64: /proc/cpuinfo names no cores; the topology falls back to physical = logical.
  CpuTopology t;
  t.logical = 16;
  t.physical = 8;
  EXPECT_EQ(choose(t, range(0, 15)).threads, 8);
  EXPECT_EQ(choose(t, range(0, 3)).threads, 2);
  EXPECT_EQ(choose(t, {5}).threads, 1);
  EXPECT_EQ(choose(t, {}).threads, 8);
}

TEST(CpuThreads, MaskSetsTheCpusAndPins) {
  const CpuTopology t = machine(6, 4, true);
  CpuThreads c = choose(t, range(0, 15), {.mask = std::vector<int>{12, 13, 14, 15}});
  EXPECT_EQ(c.kind, CoreKind::kMask);
  EXPECT_EQ(c.threads, 4);
  EXPECT_EQ(c.cpus, range(12, 15));
  EXPECT_TRUE(c.pin);
  EXPECT_EQ(describe_cpu_threads(c), "threads: 4 on CPUs 12-15 (4 cores; --cpu-mask/--cpu-range)");
  // SMT siblings count as one core.
  EXPECT_EQ(choose(t, range(0, 15), {.mask = range(0, 3)}).threads, 2);
  EXPECT_EQ(describe_cpu_threads(choose(t, range(0, 15), {.mask = std::vector<int>{0}})),
            "threads: 1 on CPUs 0 (1 core; --cpu-mask/--cpu-range)");
  // CPUs outside the affinity are dropped; none left is an error naming both sets.
  c = choose(t, range(0, 7), {.mask = range(6, 9)});
  EXPECT_EQ(c.cpus, range(6, 7));
  auto none = choose_cpu_threads(t, range(0, 7), {.mask = range(12, 15)});
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("CPUs 12-15"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("CPUs 0-7"), std::string::npos) << none.status().message();
  EXPECT_FALSE(choose_cpu_threads(t, range(0, 7), {.threads = -1}).is_ok());
}

TEST(CpuThreads, StrictSpreadsOverCoresBeforeSiblings) {
  const CpuTopology t = machine(6, 4, true);
  CpuThreads c = choose(t, range(0, 15), {.strict = true});
  EXPECT_EQ(c.thread_cpus, (std::vector<int>{0, 2, 4, 6, 8, 10}));
  c = choose(t, range(0, 15), {.threads = 8, .strict = true});
  EXPECT_EQ(c.thread_cpus, (std::vector<int>{0, 2, 4, 6, 8, 10, 1, 3}));
  // More threads than CPUs wrap around.
  c = choose(t, range(0, 15), {.threads = 3, .mask = std::vector<int>{12, 13}, .strict = true});
  EXPECT_EQ(c.thread_cpus, (std::vector<int>{12, 13, 12}));
  // On a non-hybrid CPU strict pins too.
  c = choose(machine(2, 0, false), range(0, 3), {.strict = true});
  EXPECT_TRUE(c.pin);
  EXPECT_EQ(c.thread_cpus, (std::vector<int>{0, 2}));
}

TEST(CpuThreads, MaskAndRangeParsing) {
  EXPECT_EQ(*parse_cpu_mask("ff"), range(0, 7));
  EXPECT_EQ(*parse_cpu_mask("0x30"), (std::vector<int>{4, 5}));
  EXPECT_EQ(*parse_cpu_mask("0XF000"), range(12, 15));
  EXPECT_EQ(*parse_cpu_mask("1"), std::vector<int>{0});
  EXPECT_EQ(*parse_cpu_mask("10000000000000000"), std::vector<int>{64});  // beyond 64 bits
  EXPECT_FALSE(parse_cpu_mask("").is_ok());
  EXPECT_FALSE(parse_cpu_mask("0x").is_ok());
  EXPECT_FALSE(parse_cpu_mask("0").is_ok());  // no CPU
  EXPECT_FALSE(parse_cpu_mask("fg").is_ok());
  EXPECT_EQ(*parse_cpu_range("0-5"), range(0, 5));
  EXPECT_EQ(*parse_cpu_range("7"), std::vector<int>{7});
  EXPECT_FALSE(parse_cpu_range("5-2").is_ok());
  EXPECT_FALSE(parse_cpu_range("a-b").is_ok());
  EXPECT_FALSE(parse_cpu_range("").is_ok());
  EXPECT_EQ(format_cpu_list(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(std::vector<int>{}), "");
}

TEST(CpuThreads, FlagsSetTheRequest) {
  std::optional<std::vector<int>> mask;
  bool strict = false;
  ArgParser p("x", "");
  add_cpu_set_flags(p, mask, strict);
  std::vector<const char*> argv = {"x", "-C", "0xf0", "--cpu-strict", "1"};
  ASSERT_TRUE(p.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data())));
  EXPECT_EQ(mask, range(4, 7));
  EXPECT_TRUE(strict);
  argv = {"x", "--cpu-range", "2-3"};
  ASSERT_TRUE(p.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data())));
  EXPECT_EQ(mask, range(2, 3));
  argv = {"x", "--cpu-strict", "2"};
  EXPECT_FALSE(p.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data())));
}

TEST(CpuThreads, ApplyPinsEveryThreadOfThePool) {
  // The process's own CPUs: pinning to them changes nothing but must succeed on every thread.
  const std::vector<int> usable = platform::usable_cpus();
  if (usable.empty()) GTEST_SKIP() << "the OS does not report this process's CPUs";
  CpuThreads c{.threads = 2, .kind = CoreKind::kMask, .cpus = usable, .cores = 1, .pin = true};
  ThreadPool pool(2);
  ASSERT_TRUE(apply_cpu_threads(pool, c));
  std::vector<std::vector<int>> seen(2);
  pool.run([&](int i) { seen[static_cast<size_t>(i)] = platform::usable_cpus(); });
  EXPECT_EQ(seen[0], usable);
  EXPECT_EQ(seen[1], usable);
  // Strict: thread i on its CPU.
  c.thread_cpus = {usable.back(), usable.front()};
  ASSERT_TRUE(apply_cpu_threads(pool, c));
  pool.run([&](int i) { seen[static_cast<size_t>(i)] = platform::usable_cpus(); });
  EXPECT_EQ(seen[0], std::vector<int>{usable.back()});
  EXPECT_EQ(seen[1], std::vector<int>{usable.front()});
  // Back to the whole set (the calling thread is thread 0).
  c.thread_cpus.clear();
  ASSERT_TRUE(apply_cpu_threads(pool, c));
  EXPECT_EQ(platform::usable_cpus(), usable);
  // A CPU that does not exist is an error.
  c.cpus = {1 << 20};
  EXPECT_FALSE(apply_cpu_threads(pool, c));
  // Not pinned: nothing happens.
  c.pin = false;
  EXPECT_TRUE(apply_cpu_threads(pool, c));
}

}  // namespace
}  // namespace moetier
