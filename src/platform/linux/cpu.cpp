// platform/cpu.h on Linux: /proc/cpuinfo, /sys/devices/system/cpu/online,
// /sys/devices/cpu_{core,atom}/cpus, /proc/stat,
// getrusage, sched_getaffinity / sched_setaffinity.
#include "platform/cpu.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/linux/cpu_topology.h"
#include "platform/linux/proc_text.h"
#include "platform/linux/util.h"

namespace moetier::platform {

using linux_impl::errno_text;
using linux_impl::read_text_file;

namespace {

// The CPUs the kernel was configured with (online or not); numbers run from 0 to this - 1.
int configured_cpus() {
  const long n = ::sysconf(_SC_NPROCESSORS_CONF);
  return n > 0 ? static_cast<int>(n) : 1;
}

// The CPU numbers a set must cover: the configured CPUs, at least glibc's default set size.
int cpu_set_capacity() { return std::max<int>(CPU_SETSIZE, configured_cpus()); }

// A dynamically sized cpu_set_t (machines may have more CPUs than CPU_SETSIZE).
class CpuSet {
 public:
  explicit CpuSet(int capacity) : set_(CPU_ALLOC(capacity)), bytes_(CPU_ALLOC_SIZE(capacity)) {
    if (set_ != nullptr) CPU_ZERO_S(bytes_, set_);
  }
  ~CpuSet() {
    if (set_ != nullptr) CPU_FREE(set_);
  }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;
  bool ok() const { return set_ != nullptr; }
  cpu_set_t* get() { return set_; }
  size_t bytes() const { return bytes_; }

 private:
  cpu_set_t* set_;
  size_t bytes_;
};

}  // namespace

namespace linux_impl {

CpuTopology read_cpu_topology(const std::string& root, int fallback_logical) {
  const auto read = [&](const char* path) { return read_text_file((root + path).c_str()); };
  CpuTopology t;
  const auto online = procfs::parse_cpu_list(read("/sys/devices/system/cpu/online"));
  t.logical = std::max(1, online ? static_cast<int>(online->size()) : fallback_logical);
  t.cores = procfs::cpuinfo_cores(read("/proc/cpuinfo"));
  const int cores = static_cast<int>(t.cores.size());
  t.physical = std::clamp(cores > 0 ? cores : t.logical, 1, t.logical);
  // Intel hybrid CPUs register one PMU per core type; each lists its CPUs.
  const auto p = procfs::parse_cpu_list(read("/sys/devices/cpu_core/cpus"));
  const auto e = procfs::parse_cpu_list(read("/sys/devices/cpu_atom/cpus"));
  if (p && e) {
    t.performance = *p;
    t.efficiency = *e;
  }
  return t;
}

}  // namespace linux_impl

CpuTopology cpu_topology() {
  return linux_impl::read_cpu_topology("", static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

std::string cpu_model_name() { return procfs::cpuinfo_model_name(read_text_file("/proc/cpuinfo")); }

std::vector<int> usable_cpus() {
  // Grows the set when the kernel's mask is larger (EINVAL).
  for (int capacity = cpu_set_capacity(); capacity <= (1 << 20); capacity *= 2) {
    CpuSet set(capacity);
    if (!set.ok()) return {};
    if (::sched_getaffinity(0, set.bytes(), set.get()) != 0) {
      if (errno == EINVAL) continue;
      return {};
    }
    std::vector<int> cpus;
    for (int c = 0; c < capacity; ++c) {
      if (CPU_ISSET_S(c, set.bytes(), set.get())) cpus.push_back(c);
    }
    return cpus;
  }
  return {};
}

Status pin_current_thread(std::span<const int> cpus) {
  if (cpus.empty()) return Status::bad_input("cannot pin a thread to no CPUs");
  const int n_cpus = configured_cpus();
  CpuSet set(cpu_set_capacity());
  if (!set.ok()) return Status::runtime("cannot allocate a CPU set");
  for (const int c : cpus) {
    if (c < 0 || c >= n_cpus) {
      return Status::bad_input(fmt::format("CPU {} does not exist (this machine has CPUs 0 to {})", c, n_cpus - 1));
    }
    CPU_SET_S(c, set.bytes(), set.get());
  }
  if (::sched_setaffinity(0, set.bytes(), set.get()) != 0) {
    const int e = errno;
    return Status::runtime(fmt::format("cannot pin a thread to CPUs {}: {}", fmt::join(cpus, ","), errno_text(e)));
  }
  return Status::ok();
}

std::optional<CpuTimes> sample_cpu_times(std::span<const int> cpus) {
  const std::string stat = read_text_file("/proc/stat");
  if (stat.empty()) return std::nullopt;
  const std::optional<double> busy = procfs::stat_busy_seconds(stat, cpus, cpu_time_ticks_per_second());
  if (!busy) return std::nullopt;
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return CpuTimes{.busy_seconds = *busy, .own_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime)};
}

int64_t cpu_time_ticks_per_second() { return static_cast<int64_t>(::sysconf(_SC_CLK_TCK)); }

}  // namespace moetier::platform
