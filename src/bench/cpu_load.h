// What else ran while moetier computed. Background load was measured to cut generation speed
// 3×: a figure taken beside a busy process measures the contention, not the engine. bench
// (around each timed repetition) and run (around the generation) sample the busy time of the
// CPUs this process may run on and this process's own CPU time (platform/cpu.h: the OS's
// per-CPU time counters); the difference, over the wall time, is the number of those CPUs
// other processes (and, in a VM, the hypervisor's steal) kept busy. This file is the
// arithmetic and the policy on top of the samples.
//
// Why it matters beyond noise: a parallel region ends when its last thread does. A thread
// that shares its core with another process is preempted for whole scheduler slices
// (milliseconds) while it holds work, and the other threads wait; with 2 threads on
// 2 CPUs and one busy process, tg128 fell from ~85 to ~30 t/s, and -t 1 ran at ~50
// (AMD EPYC VM, AVX2 + AVX-VNNI, q3-8l-q4km).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace moetier {

struct CpuTimeSample {
  double machine_busy_seconds = 0;  // the sampled CPUs, all processes
  double own_seconds = 0;           // this process, all its threads, user + system
  double wall_seconds = 0;          // steady clock
};

// platform::sample_cpu_times of `cpus` (usually platform::usable_cpus()) with the steady
// clock's time; nullopt where the OS does not say or `cpus` is empty.
std::optional<CpuTimeSample> sample_cpu_time(std::span<const int> cpus);

// CPUs kept busy by everything but this process between two samples, averaged over the
// wall time between them (≥ 0: the OS's two counters differ by a few ms).
double other_busy_cpus(const CpuTimeSample& before, const CpuTimeSample& after);

// The shortest timed span worth reporting: the OS counts each CPU's time in ticks
// (platform::cpu_time_ticks_per_second(); Linux: USER_HZ, usually 10 ms), so over T seconds
// the machine's busy time and this process's share of it are each off by up to ~n_cpus
// ticks, 2·n_cpus / (ticks_per_second · T) CPUs in all. At least 1 s, and long enough that
// this stays ≤ 0.25 CPUs.
double min_cpu_sample_seconds(int n_cpus, int64_t ticks_per_second);

// other_cpu_seconds (other processes' CPU time, summed over one or more sampled spans) over
// the spans' wall_seconds, or nullopt when the spans are shorter than min_cpu_sample_seconds
// (the ticks' error would be over a quarter of a CPU). What bench reports per test and run
// checks after its generation.
std::optional<double> reportable_other_busy_cpus(double other_cpu_seconds, double wall_seconds, int n_cpus,
                                                 int64_t ticks_per_second);

// True when the test's threads and the other load together ask for more CPUs than there
// are (a quarter of a CPU of slack for the sampling's granularity and short-lived tasks).
bool oversubscribed(double other_cpus, int64_t n_threads, int n_cpus);

// The warning bench (per test) and run (for its generation) print when oversubscribed.
std::string oversubscribed_warning(std::string_view test_name, double other_cpus, int64_t n_threads, int n_cpus);

}  // namespace moetier
