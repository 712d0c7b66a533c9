// cpu_topology() read from the files under a root folder, so tests can describe a made-up
// machine (a P-core/E-core laptop, SMT off) in a temporary folder. Internal to
// platform/linux/: callers use cpu.h.
#pragma once

#include <string>

#include "platform/cpu.h"

namespace moetier::platform::linux_impl {

// Reads <root>/sys/devices/system/cpu/online (the logical CPUs; `fallback_logical` when
// unreadable), <root>/proc/cpuinfo (the cores and their SMT siblings) and, on Intel hybrid
// CPUs, <root>/sys/devices/cpu_core/cpus and <root>/sys/devices/cpu_atom/cpus (one PMU per
// core type, each listing its CPUs). root "" is the running system.
CpuTopology read_cpu_topology(const std::string& root, int fallback_logical);

}  // namespace moetier::platform::linux_impl
