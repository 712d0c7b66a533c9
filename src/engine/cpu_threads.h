// Which CPUs the thread pool runs on, and with how many threads. Decode streams weights and
// waits for the slowest thread at every matrix, so on a hybrid CPU (Intel P- and E-cores)
// the default is one thread per performance core, pinned to the performance cores' logical
// CPUs: a thread on an E-core, or two on one core's SMT siblings, runs slower and makes the
// others wait. Elsewhere the default is one thread per physical core, unpinned (the OS
// places them). Both count only the CPUs this process may run on (taskset, cgroup cpusets).
// -t N sets the count, --cpu-mask / --cpu-range the set (as llama.cpp's -C / -Cr), and
// --cpu-strict 1 pins each thread to one CPU of the set. The choice is a pure function of
// the topology and the usable CPUs (unit-tested with made-up machines); apply_cpu_threads
// does the pinning.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/args.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "platform/cpu.h"

namespace moetier {

struct CpuThreadsRequest {
  int threads = 0;                       // -t; 0 = the default (see above)
  std::optional<std::vector<int>> mask = std::nullopt;  // --cpu-mask / --cpu-range: CPU numbers, ascending
  bool strict = false;                   // --cpu-strict 1: thread i on one CPU of the set
};

enum class CoreKind {
  kAll,          // every usable CPU (a CPU with one kind of core, or -t beyond the P-cores)
  kPerformance,  // a hybrid CPU's performance cores
  kMask,         // the CPUs --cpu-mask / --cpu-range named
};
// "all", "performance", "mask": the bench records' cpu_cores.
const char* core_kind_name(CoreKind kind);

struct CpuThreads {
  int threads = 1;
  CoreKind kind = CoreKind::kAll;
  std::vector<int> cpus = {};  // the set the threads run on, ascending (empty: unknown, nothing pinned)
  int cores = 0;          // physical cores with a CPU in `cpus`
  int efficiency_unused = 0;  // usable efficiency cores the default leaves idle
  bool hybrid = false;    // the usable CPUs include both performance and efficiency cores
  bool pin = false;       // pin the pool's threads (to `cpus`, or one CPU each when strict)
  // --cpu-strict: thread i's CPU (threads entries: spread over the cores first, then their
  // SMT siblings, wrapping around when there are more threads than CPUs); empty otherwise.
  std::vector<int> thread_cpus = {};
};

// `usable`: the process's CPUs (platform::usable_cpus() taken before anything was pinned;
// empty: unknown, then every online CPU of `topology` counts). kBadInput when the mask names
// no usable CPU, or for threads < 0.
Result<CpuThreads> choose_cpu_threads(const platform::CpuTopology& topology, std::span<const int> usable,
                                      const CpuThreadsRequest& request);

// The load line: "threads: 6 on the performance cores (CPUs 0-11; 4 efficiency cores unused;
// -t/--cpu-mask override)"; "threads: 4 on CPUs 0-3 (--cpu-mask)"; for the default on a CPU
// with one kind of core, "threads: 8 (8 cores)".
std::string describe_cpu_threads(const CpuThreads& choice);

// The CPU numbers as a kernel CPU list: "0-3,8,10-11" ("" for none).
std::string format_cpu_list(std::span<const int> cpus);

// --cpu-mask: hex digits (an optional 0x prefix), bit i = CPU i, e.g. "ff" = CPUs 0-7,
// "0x30" = CPUs 4 and 5. --cpu-range: "lo-hi" (inclusive) or one CPU. kBadInput naming the
// flag for malformed text or an empty set.
Result<std::vector<int>> parse_cpu_mask(std::string_view hex);
Result<std::vector<int>> parse_cpu_range(std::string_view range);

// --cpu-mask HEX / -C, --cpu-range lo-hi / -Cr (either sets `mask`; the last given wins) and
// --cpu-strict 0|1, as llama.cpp spells them.
void add_cpu_set_flags(ArgParser& parser, std::optional<std::vector<int>>& mask, bool& strict);

// Pins every thread of `pool` (the calling thread is its thread 0) as `choice` says: to its
// CPU when strict, else to `choice.cpus`. Does nothing when choice.pin is false, unless
// `always` (bench: a later test must undo an earlier test's narrower pin; cpus then is the
// process's whole set). The first pinning error, with the CPUs.
Status apply_cpu_threads(ThreadPool& pool, const CpuThreads& choice, bool always = false);

}  // namespace moetier
