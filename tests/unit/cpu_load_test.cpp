// The background-load figure of `moetier bench` and `run`'s warning (bench/cpu_load.h): the
// arithmetic of other processes' CPUs, and when a test counts as oversubscribed (the OS's
// counters themselves are platform's, tested in platform_test.cpp).
#include "bench/cpu_load.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/cpu.h"

namespace moetier {
namespace {

TEST(CpuLoad, OtherProcessesAreTheMachinesBusyTimeLessOurs) {
  const CpuTimeSample before{.machine_busy_seconds = 100, .own_seconds = 10, .wall_seconds = 1000};
  // 2 s of wall time: the machine was busy 5 CPU-seconds, 3 of them ours.
  const CpuTimeSample after{.machine_busy_seconds = 105, .own_seconds = 13, .wall_seconds = 1002};
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, after), 1.0);
  // Our own time measured a little above the ticks' count: never below zero.
  const CpuTimeSample idle{.machine_busy_seconds = 102.9, .own_seconds = 13, .wall_seconds = 1002};
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, idle), 0.0);
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, before), 0.0);  // no time passed
}

TEST(CpuLoad, SampleSpanKeepsTheTicksErrorUnderAQuarterCpu) {
  EXPECT_DOUBLE_EQ(min_cpu_sample_seconds(2, 100), 1.0);
  EXPECT_DOUBLE_EQ(min_cpu_sample_seconds(32, 100), 2.56);
  for (int n : {1, 2, 8, 16, 64, 256}) EXPECT_LE(2.0 * n / (100 * min_cpu_sample_seconds(n, 100)), 0.25) << n;
  const std::vector<int> cpus = platform::usable_cpus();
  ASSERT_FALSE(cpus.empty());
  const auto sample = sample_cpu_time(cpus);
  ASSERT_TRUE(sample.has_value());  // every OS moetier runs on says
  EXPECT_GT(sample->machine_busy_seconds, 0);
  EXPECT_GT(sample->wall_seconds, 0);
}

TEST(CpuLoad, ReportedOnlyOverASpanLongEnoughForTheTicks) {
  // 2 CPUs at 100 ticks/s: spans under 1 s give nothing; from 1 s on, CPU-seconds over seconds.
  EXPECT_FALSE(reportable_other_busy_cpus(0.5, 0.99, 2, 100).has_value());
  EXPECT_FALSE(reportable_other_busy_cpus(0.0, 0.0, 2, 100).has_value());
  EXPECT_DOUBLE_EQ(*reportable_other_busy_cpus(0.5, 1.0, 2, 100), 0.5);
  EXPECT_DOUBLE_EQ(*reportable_other_busy_cpus(3.0, 4.0, 2, 100), 0.75);
  // 32 CPUs need 2.56 s.
  EXPECT_FALSE(reportable_other_busy_cpus(1.0, 2.5, 32, 100).has_value());
  EXPECT_DOUBLE_EQ(*reportable_other_busy_cpus(2.6, 2.6, 32, 100), 1.0);
}

TEST(CpuLoad, OversubscribedWhenOthersAndThreadsExceedTheCpus) {
  EXPECT_FALSE(oversubscribed(0.1, 2, 2));
  EXPECT_FALSE(oversubscribed(0.2, 2, 2));
  EXPECT_TRUE(oversubscribed(0.3, 2, 2));
  EXPECT_TRUE(oversubscribed(1.0, 2, 2));
  EXPECT_FALSE(oversubscribed(1.0, 1, 2));
  EXPECT_FALSE(oversubscribed(1.0, 6, 8));
  EXPECT_TRUE(oversubscribed(3.0, 6, 8));
  EXPECT_FALSE(oversubscribed(5.0, 2, 0));  // CPU count unknown: no claim
  const std::string w = oversubscribed_warning("tg128", 1.02, 2, 2);
  EXPECT_NE(w.find("1.0 of 2 CPUs"), std::string::npos) << w;
  EXPECT_NE(w.find("-t 1"), std::string::npos) << w;
  EXPECT_NE(oversubscribed_warning("tg128", 7.9, 8, 8).find("-t 1"), std::string::npos);  // never -t 0
  EXPECT_NE(oversubscribed_warning("pp512", 2.0, 8, 8).find("-t 6"), std::string::npos);
}

}  // namespace
}  // namespace moetier
