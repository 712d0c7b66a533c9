// The CPUs as the OS presents them: topology (cores, hardware threads, the performance and
// efficiency cores of a hybrid CPU), the model name, the busy time of CPUs and this
// process's CPU time, and thread affinity. CPUs are the OS's logical CPU numbers (Linux:
// cpuN). The OS side (Linux: /proc, /sys, sched_*affinity, getrusage; Windows:
// GetLogicalProcessorInformationEx, GetSystemTimes, SetThreadAffinityMask) lives in
// platform/<os>/.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace moetier::platform {

struct CpuTopology {
  int logical = 1;   // hardware threads the OS runs on (online); >= 1
  int physical = 1;  // cores (best effort; the logical count where unknown); 1 <= physical <= logical
  // Hybrid CPUs (Intel P- and E-cores): the logical CPUs of the performance and of the
  // efficiency cores, ascending. Both empty on a CPU with one kind of core, or where unknown.
  std::vector<int> performance;
  std::vector<int> efficiency;
  // Each core's logical CPUs (SMT siblings share a core), ascending, the cores ordered by
  // their first CPU. Empty where unknown (e.g. arm64's /proc/cpuinfo names no cores).
  std::vector<std::vector<int>> cores;
};
// Reads the topology (cheap, but callers that need it often keep it: it does not change).
// It describes the machine's online CPUs, not this process's affinity (usable_cpus).
CpuTopology cpu_topology();

// The CPU's marketing name, e.g. "AMD EPYC 7B13 64-Core Processor"; "" when unknown.
std::string cpu_model_name();

// The CPUs the calling thread may run on, ascending: the process's affinity (taskset,
// cgroup cpusets) unless the thread was pinned with pin_current_thread. Empty when unknown.
std::vector<int> usable_cpus();

// Restricts the calling thread to `cpus` (non-empty). kBadInput for an empty set or a CPU
// number the OS does not have, kRuntime when the OS refuses (e.g. CPUs outside this
// process's cgroup cpuset).
Status pin_current_thread(std::span<const int> cpus);

// Cumulative CPU time, for the load other processes put on the CPUs we run on: take two
// samples and subtract.
struct CpuTimes {
  // The given CPUs, all processes: time running (user, system, interrupts) or taken by a
  // hypervisor (a VM's steal); idle and I/O wait are not counted.
  double busy_seconds = 0;
  double own_seconds = 0;   // this process, all its threads, user + system
};
// nullopt where the OS does not say (Linux without /proc/stat), a CPU in `cpus` is unknown
// or `cpus` is empty.
std::optional<CpuTimes> sample_cpu_times(std::span<const int> cpus);
// The resolution of busy_seconds: counter ticks per second (Linux: USER_HZ, usually 100).
// Over a span of T seconds each CPU's busy time is off by up to one tick.
int64_t cpu_time_ticks_per_second();

}  // namespace moetier::platform
