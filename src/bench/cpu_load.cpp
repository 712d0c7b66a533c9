#include "bench/cpu_load.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "platform/cpu.h"

namespace moetier {

std::optional<CpuTimeSample> sample_cpu_time(std::span<const int> cpus) {
  const std::optional<platform::CpuTimes> t = platform::sample_cpu_times(cpus);
  if (!t) return std::nullopt;
  return CpuTimeSample{
      .machine_busy_seconds = t->busy_seconds,
      .own_seconds = t->own_seconds,
      .wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
  };
}

double other_busy_cpus(const CpuTimeSample& before, const CpuTimeSample& after) {
  const double wall = after.wall_seconds - before.wall_seconds;
  if (wall <= 0) return 0;
  const double other = (after.machine_busy_seconds - before.machine_busy_seconds) - (after.own_seconds - before.own_seconds);
  return std::max(0.0, other / wall);
}

double min_cpu_sample_seconds(int n_cpus, int64_t ticks_per_second) {
  if (ticks_per_second <= 0) return 1.0;
  return std::max(1.0, 8.0 * n_cpus / static_cast<double>(ticks_per_second));
}

std::optional<double> reportable_other_busy_cpus(double other_cpu_seconds, double wall_seconds, int n_cpus,
                                                 int64_t ticks_per_second) {
  if (wall_seconds <= 0 || wall_seconds < min_cpu_sample_seconds(n_cpus, ticks_per_second)) return std::nullopt;
  return other_cpu_seconds / wall_seconds;
}

bool oversubscribed(double other_cpus, int64_t n_threads, int n_cpus) {
  return n_cpus > 0 && other_cpus + static_cast<double>(n_threads) > static_cast<double>(n_cpus) + 0.25;
}

std::string oversubscribed_warning(std::string_view test_name, double other_cpus, int64_t n_threads, int n_cpus) {
  const int64_t free_cpus = std::max<int64_t>(1, static_cast<int64_t>(std::floor(n_cpus - other_cpus + 0.25)));
  return fmt::format(
      "other processes kept {:.1f} of {} CPUs busy while {} ran on {} threads: its threads were preempted "
      "while holding work and the others waited, so the figure measures the contention. Stop the other load, "
      "or use -t {} (the free CPUs).",
      other_cpus, n_cpus, test_name, n_threads, free_cpus);
}

}  // namespace moetier
