// platform/cpu.h on Windows: GetLogicalProcessorInformationEx (cores and their
// EfficiencyClass), the registry's processor name, thread group affinity,
// NtQuerySystemInformation's per-CPU times (GetSystemTimes' total where those are missing)
// and GetProcessTimes.
//
// CPU numbers: Windows names a logical CPU by (processor group, bit in the group's 64-bit
// mask). Here they are flattened: the CPUs of group g are numbered after those of groups
// 0..g-1 (on machines with up to 64 CPUs there is one group and the numbers are the bits).
#include "platform/cpu.h"

#include <windows.h>
#include <winternl.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/windows/cpu_topology.h"
#include "platform/windows/util.h"

namespace moetier::platform {

using windows_impl::last_error_text;

namespace {

// The first flat number of each processor group.
std::vector<int> group_offsets() {
  const WORD groups = ::GetActiveProcessorGroupCount();
  std::vector<int> offsets;
  int next = 0;
  for (WORD g = 0; g < groups; ++g) {
    offsets.push_back(next);
    next += static_cast<int>(::GetActiveProcessorCount(g));
  }
  return offsets;
}

int total_cpus() { return static_cast<int>(::GetActiveProcessorCount(ALL_PROCESSOR_GROUPS)); }

void append_mask(std::vector<int>& cpus, const std::vector<int>& offsets, WORD group, KAFFINITY mask) {
  if (group >= offsets.size()) return;
  for (int bit = 0; bit < 64; ++bit) {
    if ((mask >> bit) & 1) cpus.push_back(offsets[group] + bit);
  }
}

// 100 ns units (FILETIME, LARGE_INTEGER times) to seconds.
double hundred_ns_to_seconds(uint64_t t) { return static_cast<double>(t) * 1e-7; }
uint64_t filetime_ticks(const FILETIME& ft) { return (static_cast<uint64_t>(ft.dwHighDateTime) << 32) | ft.dwLowDateTime; }

}  // namespace

namespace windows_impl {

CpuTopology topology_from_processor_info(std::span<const uint8_t> records, const std::vector<int>& offsets,
                                         int logical) {
  CpuTopology t;
  t.logical = std::max(1, logical);
  t.physical = t.logical;
  std::map<int, std::vector<int>, std::greater<>> by_class;
  std::vector<std::vector<int>> cores;
  const size_t header = offsetof(SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX, Processor);
  for (size_t at = 0; at + header + sizeof(PROCESSOR_RELATIONSHIP) <= records.size();) {
    const auto* info = reinterpret_cast<const SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX*>(records.data() + at);
    if (info->Size == 0 || at + info->Size > records.size()) break;
    if (info->Relationship == RelationProcessorCore) {
      // EfficiencyClass is the byte after Flags (Windows 10 SDK); older MinGW-w64 headers
      // still call it Reserved[0], so it is read by position.
      const BYTE efficiency_class = reinterpret_cast<const BYTE*>(&info->Processor)[1];
      std::vector<int> cpus;
      const WORD groups = info->Processor.GroupCount;
      const size_t masks_end = header + offsetof(PROCESSOR_RELATIONSHIP, GroupMask) + groups * sizeof(GROUP_AFFINITY);
      if (masks_end > info->Size) break;  // a record shorter than its group masks: stop reading
      for (WORD g = 0; g < groups; ++g) {
        append_mask(cpus, offsets, info->Processor.GroupMask[g].Group, info->Processor.GroupMask[g].Mask);
      }
      if (!cpus.empty()) {
        std::sort(cpus.begin(), cpus.end());
        std::vector<int>& kind = by_class[efficiency_class];
        kind.insert(kind.end(), cpus.begin(), cpus.end());
        cores.push_back(std::move(cpus));
      }
    }
    at += info->Size;
  }
  if (cores.empty()) return t;
  std::sort(cores.begin(), cores.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  t.physical = std::clamp(static_cast<int>(cores.size()), 1, t.logical);
  t.cores = std::move(cores);
  if (by_class.size() >= 2) {
    for (auto it = by_class.begin(); it != by_class.end(); ++it) {
      std::vector<int>& dst = it == by_class.begin() ? t.performance : t.efficiency;
      dst.insert(dst.end(), it->second.begin(), it->second.end());
    }
    std::sort(t.performance.begin(), t.performance.end());
    std::sort(t.efficiency.begin(), t.efficiency.end());
  }
  return t;
}

}  // namespace windows_impl

CpuTopology cpu_topology() {
  const int logical = std::max(1, total_cpus());
  DWORD bytes = 0;
  ::GetLogicalProcessorInformationEx(RelationProcessorCore, nullptr, &bytes);
  std::vector<uint8_t> buffer(bytes);
  if (bytes == 0 || !::GetLogicalProcessorInformationEx(
                        RelationProcessorCore,
                        reinterpret_cast<SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX*>(buffer.data()), &bytes)) {
    CpuTopology t;
    t.logical = t.physical = logical;
    return t;
  }
  buffer.resize(bytes);
  return windows_impl::topology_from_processor_info(buffer, group_offsets(), logical);
}

std::string cpu_model_name() {
  wchar_t name[256] = {};
  DWORD size = sizeof(name);
  if (::RegGetValueW(HKEY_LOCAL_MACHINE, L"HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0", L"ProcessorNameString",
                     RRF_RT_REG_SZ, nullptr, name, &size) != ERROR_SUCCESS) {
    return "";
  }
  std::string text = windows_impl::narrow(name);
  const size_t b = text.find_first_not_of(' ');
  const size_t e = text.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
}

std::vector<int> usable_cpus() {
  // The thread's own group and mask: the process's affinity unless the thread was pinned.
  GROUP_AFFINITY affinity{};
  if (!::GetThreadGroupAffinity(::GetCurrentThread(), &affinity)) return {};
  std::vector<int> cpus;
  append_mask(cpus, group_offsets(), affinity.Group, affinity.Mask);
  return cpus;
}

Status pin_current_thread(std::span<const int> cpus) {
  if (cpus.empty()) return Status::bad_input("cannot pin a thread to no CPUs");
  const int n_cpus = total_cpus();
  const std::vector<int> offsets = group_offsets();
  GROUP_AFFINITY affinity{};
  bool first = true;
  for (const int c : cpus) {
    if (c < 0 || c >= n_cpus) {
      return Status::bad_input(fmt::format("CPU {} does not exist (this machine has CPUs 0 to {})", c, n_cpus - 1));
    }
    const auto group = static_cast<WORD>(std::upper_bound(offsets.begin(), offsets.end(), c) - offsets.begin() - 1);
    if (!first && group != affinity.Group) {
      return Status::bad_input(fmt::format(
          "cannot pin a thread to CPUs {}: Windows runs a thread within one processor group (CPUs {} to {} here)",
          fmt::join(cpus, ","), offsets[affinity.Group],
          static_cast<size_t>(affinity.Group) + 1 < offsets.size() ? offsets[affinity.Group + 1] - 1 : n_cpus - 1));
    }
    affinity.Group = group;
    affinity.Mask |= KAFFINITY{1} << (c - offsets[group]);
    first = false;
  }
  if (!::SetThreadGroupAffinity(::GetCurrentThread(), &affinity, nullptr)) {
    return Status::runtime(fmt::format("cannot pin a thread to CPUs {}: {}", fmt::join(cpus, ","), last_error_text()));
  }
  return Status::ok();
}

std::optional<CpuTimes> sample_cpu_times(std::span<const int> cpus) {
  if (cpus.empty()) return std::nullopt;
  const int n = total_cpus();
  // Per-CPU kernel (idle included), user and idle time of the calling thread's processor
  // group, in 100 ns units (winternl.h documents this class).
  std::vector<SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION> per_cpu(static_cast<size_t>(std::max(n, 1)));
  ULONG got = 0;
  const NTSTATUS st = ::NtQuerySystemInformation(SystemProcessorPerformanceInformation, per_cpu.data(),
                                                 static_cast<ULONG>(per_cpu.size() * sizeof(per_cpu[0])), &got);
  for (const int c : cpus) {
    if (c < 0 || c >= n) return std::nullopt;
  }
  uint64_t busy = 0;
  const size_t known = st < 0 ? 0 : got / sizeof(per_cpu[0]);
  if (std::all_of(cpus.begin(), cpus.end(), [&](int c) { return static_cast<size_t>(c) < known; })) {
    for (const int c : cpus) {
      const auto& p = per_cpu[static_cast<size_t>(c)];
      busy += static_cast<uint64_t>(p.KernelTime.QuadPart - p.IdleTime.QuadPart + p.UserTime.QuadPart);
    }
  } else {
    // No per-CPU figures (the call failed, or it covers only the calling thread's processor
    // group): GetSystemTimes' sum over every CPU serves when `cpus` is all of them.
    std::vector<int> sorted(cpus.begin(), cpus.end());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    FILETIME idle{}, kernel{}, user{};
    if (static_cast<int>(sorted.size()) != n || !::GetSystemTimes(&idle, &kernel, &user)) return std::nullopt;
    busy = filetime_ticks(kernel) - filetime_ticks(idle) + filetime_ticks(user);  // kernel time includes idle
  }
  FILETIME created{}, exited{}, kernel{}, user{};
  if (!::GetProcessTimes(::GetCurrentProcess(), &created, &exited, &kernel, &user)) return std::nullopt;
  return CpuTimes{.busy_seconds = hundred_ns_to_seconds(busy),
                  .own_seconds = hundred_ns_to_seconds(filetime_ticks(kernel) + filetime_ticks(user))};
}

int64_t cpu_time_ticks_per_second() {
  // CPU times are charged at each clock interrupt (15.625 ms by default: 64 per second).
  DWORD adjustment = 0, increment = 0;
  BOOL disabled = FALSE;
  if (::GetSystemTimeAdjustment(&adjustment, &increment, &disabled) && increment > 0) {
    return std::max<int64_t>(1, 10'000'000 / static_cast<int64_t>(increment));
  }
  return 64;
}

}  // namespace moetier::platform
