#include "engine/cpu_threads.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace moetier {

namespace {

std::vector<int> intersect(std::span<const int> a, std::span<const int> b) {
  std::vector<int> x(a.begin(), a.end()), y(b.begin(), b.end()), out;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The topology's cores as seen through a CPU set: per core, its CPUs in the set (cores
// without any left out), ordered by first CPU. A CPU the topology puts in no core counts as
// a core of its own. Without core information: one group of all the CPUs (see count_cores).
class CoresOf {
 public:
  CoresOf(const platform::CpuTopology& t, std::span<const int> cpus) : known_(!t.cores.empty()) {
    std::map<int, int> core_of;  // CPU -> index into t.cores
    for (size_t c = 0; c < t.cores.size(); ++c) {
      for (int cpu : t.cores[c]) core_of[cpu] = static_cast<int>(c);
    }
    std::map<int, std::vector<int>> groups;  // core index (or -1 - cpu) -> CPUs of the set
    for (int cpu : cpus) {
      const auto it = core_of.find(cpu);
      groups[it != core_of.end() ? it->second : -1 - cpu].push_back(cpu);
    }
    for (auto& [key, g] : groups) groups_.push_back(std::move(g));
    std::sort(groups_.begin(), groups_.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
    n_cpus_ = static_cast<int>(cpus.size());
    physical_ = t.physical;
    logical_ = t.logical;
  }

  // Cores with a CPU in the set. Without core information, the machine's cores-per-CPU
  // ratio applied to the set (rounded up; at least 1 for a non-empty set).
  int count() const {
    if (n_cpus_ == 0) return 0;
    if (known_) return static_cast<int>(groups_.size());
    const int64_t estimate = (int64_t{n_cpus_} * physical_ + logical_ - 1) / std::max(1, logical_);
    return static_cast<int>(std::clamp<int64_t>(estimate, 1, n_cpus_));
  }

  // The set's CPUs ordered one per core first (each core's first CPU), then each core's
  // second CPU, and so on: strict pinning fills the physical cores before their siblings.
  std::vector<int> spread() const {
    std::vector<int> out;
    for (size_t round = 0;; ++round) {
      bool any = false;
      for (const auto& g : groups_) {
        if (round < g.size()) {
          out.push_back(g[round]);
          any = true;
        }
      }
      if (!any) break;
    }
    return out;
  }

 private:
  bool known_;
  std::vector<std::vector<int>> groups_;
  int n_cpus_ = 0, physical_ = 1, logical_ = 1;
};

}  // namespace

const char* core_kind_name(CoreKind kind) {
  switch (kind) {
    case CoreKind::kAll: return "all";
    case CoreKind::kPerformance: return "performance";
    case CoreKind::kMask: return "mask";
  }
  return "all";
}

Result<CpuThreads> choose_cpu_threads(const platform::CpuTopology& topology, std::span<const int> usable,
                                      const CpuThreadsRequest& request) {
  if (request.threads < 0) return Status::bad_input(fmt::format("-t must be at least 1, not {}", request.threads));
  // The CPUs this process may run on; unknown: every online CPU.
  std::vector<int> allowed(usable.begin(), usable.end());
  if (allowed.empty()) {
    for (const auto& core : topology.cores) allowed.insert(allowed.end(), core.begin(), core.end());
    if (allowed.empty()) {
      for (int c = 0; c < std::max(1, topology.logical); ++c) allowed.push_back(c);
    }
  }
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());

  CpuThreads out;
  const std::vector<int> p = intersect(topology.performance, allowed);
  const std::vector<int> e = intersect(topology.efficiency, allowed);
  out.hybrid = !p.empty() && !e.empty();
  if (request.mask) {
    out.kind = CoreKind::kMask;
    out.cpus = intersect(*request.mask, allowed);
    if (out.cpus.empty()) {
      return Status::bad_input(fmt::format("--cpu-mask/--cpu-range selects CPUs {}, but this process may run only on CPUs {}",
                                           format_cpu_list(*request.mask), format_cpu_list(allowed)));
    }
    out.pin = true;
  } else if (out.hybrid && (request.threads == 0 || request.threads <= static_cast<int>(p.size()))) {
    out.kind = CoreKind::kPerformance;
    out.cpus = p;
    out.efficiency_unused = CoresOf(topology, e).count();
    out.pin = true;
  } else {
    out.kind = CoreKind::kAll;
    out.cpus = allowed;
  }
  const CoresOf cores(topology, out.cpus);
  out.cores = cores.count();
  out.threads = request.threads > 0 ? request.threads : out.cores;
  if (request.strict) {
    out.pin = true;
    const std::vector<int> order = cores.spread();
    for (int i = 0; i < out.threads; ++i) out.thread_cpus.push_back(order[static_cast<size_t>(i) % order.size()]);
  }
  return out;
}

std::string describe_cpu_threads(const CpuThreads& c) {
  const std::string strict = c.thread_cpus.empty() ? "" : "; one CPU per thread (--cpu-strict)";
  switch (c.kind) {
    case CoreKind::kPerformance:
      return fmt::format("threads: {} on the {} performance cores (CPUs {}{}{}; -t/--cpu-mask override)", c.threads,
                         c.cores, format_cpu_list(c.cpus),
                         c.efficiency_unused > 0 ? fmt::format("; {} efficiency cores unused", c.efficiency_unused) : "",
                         strict);
    case CoreKind::kMask:
      return fmt::format("threads: {} on CPUs {} ({} core{}; --cpu-mask/--cpu-range{})", c.threads,
                         format_cpu_list(c.cpus), c.cores, c.cores == 1 ? "" : "s", strict);
    case CoreKind::kAll:
      break;
  }
  if (c.hybrid) {
    return fmt::format("threads: {} on all {} cores, performance and efficiency (CPUs {}{})", c.threads, c.cores,
                       format_cpu_list(c.cpus), strict);
  }
  return fmt::format("threads: {} ({} core{}{})", c.threads, c.cores, c.cores == 1 ? "" : "s", strict);
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::vector<int> v(cpus.begin(), cpus.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> parse_cpu_mask(std::string_view hex) {
  const std::string_view original = hex;
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  constexpr size_t kMaxDigits = 1024;  // 4096 CPUs
  if (hex.empty() || hex.size() > kMaxDigits) {
    return Status::bad_input(fmt::format("--cpu-mask takes hex digits (bit i = CPU i, e.g. ff = CPUs 0-7), not '{}'", original));
  }
  std::vector<int> cpus;
  // The last digit holds CPUs 0-3.
  for (size_t k = 0; k < hex.size(); ++k) {
    const char ch = hex[hex.size() - 1 - k];
    int v = 0;
    if (ch >= '0' && ch <= '9') v = ch - '0';
    else if (ch >= 'a' && ch <= 'f') v = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F') v = ch - 'A' + 10;
    else {
      return Status::bad_input(fmt::format("--cpu-mask takes hex digits (bit i = CPU i, e.g. ff = CPUs 0-7), not '{}'", original));
    }
    for (int bit = 0; bit < 4; ++bit) {
      if ((v >> bit) & 1) cpus.push_back(static_cast<int>(4 * k) + bit);
    }
  }
  if (cpus.empty()) return Status::bad_input(fmt::format("--cpu-mask {} selects no CPU", original));
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

Result<std::vector<int>> parse_cpu_range(std::string_view range) {
  const auto bad = [&] {
    return Status::bad_input(fmt::format("--cpu-range takes lo-hi (CPUs lo to hi, e.g. 0-5), not '{}'", range));
  };
  const auto number = [](std::string_view s) -> std::optional<int> {
    if (s.empty() || s.size() > 5) return std::nullopt;
    int v = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return std::nullopt;
      v = v * 10 + (ch - '0');
    }
    return v;
  };
  const size_t dash = range.find('-');
  const auto lo = number(range.substr(0, dash));
  const auto hi = dash == std::string_view::npos ? lo : number(range.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return bad();
  std::vector<int> cpus;
  for (int c = *lo; c <= *hi; ++c) cpus.push_back(c);
  return cpus;
}

void add_cpu_set_flags(ArgParser& p, std::optional<std::vector<int>>& mask, bool& strict) {
  p.option({"-C", "--cpu-mask"}, "HEX",
           "run the threads on these CPUs: a hex mask, bit i = CPU i (e.g. ff = CPUs 0-7; default: a hybrid CPU's "
           "performance cores, else every CPU)",
           [&mask](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(mask, parse_cpu_mask(v));
             return Status::ok();
           });
  p.option({"-Cr", "--cpu-range"}, "LO-HI", "run the threads on CPUs LO to HI (as --cpu-mask)",
           [&mask](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(mask, parse_cpu_range(v));
             return Status::ok();
           });
  p.option({"--cpu-strict"}, "0|1", "1: pin each thread to one CPU of the set (cores first, then SMT siblings)",
           [&strict](std::string_view v) -> Status {
             if (v != "0" && v != "1") return Status::bad_input(fmt::format("--cpu-strict takes 0 or 1, not '{}'", v));
             strict = v == "1";
             return Status::ok();
           });
}

Status apply_cpu_threads(ThreadPool& pool, const CpuThreads& choice, bool always) {
  if ((!choice.pin && !always) || choice.cpus.empty()) return Status::ok();
  std::vector<Status> results(static_cast<size_t>(pool.size()));
  pool.run([&](int i) {
    const size_t t = static_cast<size_t>(i);
    if (!choice.thread_cpus.empty()) {
      const int cpu = choice.thread_cpus[t % choice.thread_cpus.size()];
      results[t] = platform::pin_current_thread(std::span<const int>(&cpu, 1));
    } else {
      results[t] = platform::pin_current_thread(choice.cpus);
    }
  });
  for (Status& st : results) {
    if (!st) return st;
  }
  return Status::ok();
}

}  // namespace moetier
