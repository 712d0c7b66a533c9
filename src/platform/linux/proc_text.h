// The text formats of Linux's /proc and /sys files, parsed without touching the system
// (unit-tested on fixed text). Internal to platform/linux/: callers use memory.h and cpu.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "platform/memory.h"

namespace moetier::platform::procfs {

// A "Key:   123 kB" line of /proc/meminfo, /proc/<pid>/status or a smaps entry: the value
// in bytes (times 1024 when followed by "kB"); nullopt when no line has the key or its value
// is not a number.
std::optional<uint64_t> field_bytes(std::string_view text, std::string_view key);

// /proc/meminfo: MemTotal and MemAvailable.
MemoryInfo parse_meminfo(std::string_view text);

// /sys/kernel/mm/transparent_hugepage/enabled: the bracketed word of "always [madvise] never";
// kUnavailable for empty or unknown text.
HugePageMode parse_thp_enabled(std::string_view text);

// /proc/<pid>/smaps: Rss, AnonHugePages and FilePmdMapped of the entry ("lo-hi perms ..."
// line, hex addresses) whose range contains addr; all nullopt when none does.
RegionPages parse_smaps_entry(std::string_view text, uintptr_t addr);

// /proc/<pid>/status: VmRSS and VmHWM.
ProcessMemory parse_process_status(std::string_view text);

// /proc/stat: the busy time in seconds of the CPUs `cpus` (their "cpuN" lines): user + nice
// + system + irq + softirq + steal, at `ticks_per_second` (USER_HZ). Idle and iowait are
// left out; guest time is already inside user and nice. nullopt when a CPU's line is
// missing, repeated or malformed, `cpus` is empty or ticks_per_second <= 0.
std::optional<double> stat_busy_seconds(std::string_view text, std::span<const int> cpus, int64_t ticks_per_second);

// /proc/cpuinfo: the first "model name" value, trimmed; "" when there is none (e.g. arm64).
std::string cpuinfo_model_name(std::string_view text);
// /proc/cpuinfo: the number of distinct (physical id, core id) pairs, i.e. cores; 0 when the
// text names none.
int cpuinfo_core_count(std::string_view text);
// /proc/cpuinfo: each core's logical CPUs ("processor" numbers sharing a (physical id,
// core id) pair), ascending, the cores ordered by their first CPU; empty when the text
// names no cores or a processor block lacks its number.
std::vector<std::vector<int>> cpuinfo_cores(std::string_view text);

// A kernel CPU list ("0-3,8,10-11\n", as in /sys/devices/cpu_core/cpus): the CPU numbers,
// ascending, without repeats; nullopt when malformed or empty.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// lock_in_ram's error: bytes that could not be locked, the OS's reason, and the
// RLIMIT_MEMLOCK soft limit as text ("8.0 MiB", "unlimited", "unknown").
std::string lock_error_message(uint64_t bytes, std::string_view reason, std::string_view limit_text);

}  // namespace moetier::platform::procfs
