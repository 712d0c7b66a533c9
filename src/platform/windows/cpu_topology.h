// cpu_topology() from the buffer GetLogicalProcessorInformationEx(RelationProcessorCore)
// fills, so tests can describe a made-up machine (P-cores with SMT, E-cores without).
// Internal to platform/windows/: callers use cpu.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "platform/cpu.h"

namespace moetier::platform::windows_impl {

// `records`: SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX records one after another, one per
// core (others are skipped). `offsets`: the first flat CPU number of each processor
// group. `logical`: the active CPUs. A core's EfficiencyClass is higher for faster cores;
// the highest class is the performance cores and every other class the efficiency cores
// (all equal on a CPU with one kind of core: no hybrid sets).
CpuTopology topology_from_processor_info(std::span<const uint8_t> records, const std::vector<int>& offsets,
                                         int logical);

}  // namespace moetier::platform::windows_impl
