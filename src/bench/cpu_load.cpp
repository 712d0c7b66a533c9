#include "bench/cpu_load.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace moetier {

std::optional<double> proc_stat_busy_seconds(std::string_view text, std::span<const int> cpus,
                                             int64_t ticks_per_second) {
  if (ticks_per_second <= 0 || cpus.empty()) return std::nullopt;
  int64_t busy = 0;
  std::vector<bool> seen(cpus.size(), false);
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    std::istringstream in{std::string(line.substr(3))};
    int cpu = -1;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    int64_t v[8];
    if (!(in >> cpu)) return std::nullopt;
    const auto it = std::find(cpus.begin(), cpus.end(), cpu);
    if (it == cpus.end()) continue;
    for (int64_t& x : v) {
      if (!(in >> x) || x < 0) return std::nullopt;
    }
    const size_t index = static_cast<size_t>(it - cpus.begin());
    if (seen[index]) return std::nullopt;
    seen[index] = true;
    busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) return std::nullopt;  // a CPU's line is missing
  return static_cast<double>(busy) / static_cast<double>(ticks_per_second);
}

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::optional<CpuTimeSample> sample_cpu_time(std::span<const int> cpus) {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto busy = proc_stat_busy_seconds(text.str(), cpus, sysconf(_SC_CLK_TCK));
  if (!busy) return std::nullopt;
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return CpuTimeSample{
      .machine_busy_seconds = *busy,
      .own_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime),
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
