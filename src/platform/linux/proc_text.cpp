#include "platform/linux/proc_text.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/format.h"

namespace moetier::platform::procfs {
namespace {

// Calls fn(line) for each line of text (without the '\n'); stops when fn returns false.
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    if (!fn(text.substr(pos, eol - pos))) return;
    pos = eol + 1;
  }
}

// A non-negative decimal number at the start of s (after blanks); nullopt when none.
std::optional<uint64_t> leading_number(std::string_view s) {
  const std::string str(s);
  const char* begin = str.c_str();
  while (*begin == ' ' || *begin == '\t') ++begin;
  if (*begin < '0' || *begin > '9') return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(begin, &end, 10);
  return static_cast<uint64_t>(v);
}

// The value after "key:" in a "key<blanks>: value" line of /proc/cpuinfo; nullopt when the
// line is not that key's.
std::optional<std::string_view> cpuinfo_value(std::string_view line, std::string_view key) {
  if (line.substr(0, key.size()) != key) return std::nullopt;
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  // Between the key and the colon only blanks (so "model" does not match "model name").
  for (size_t i = key.size(); i < colon; ++i) {
    if (line[i] != ' ' && line[i] != '\t') return std::nullopt;
  }
  std::string_view v = line.substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
  return v;
}

}  // namespace

std::optional<uint64_t> field_bytes(std::string_view text, std::string_view key) {
  std::optional<uint64_t> out;
  for_each_line(text, [&](std::string_view line) {
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') return true;
    const std::string_view rest = line.substr(key.size() + 1);
    if (const std::optional<uint64_t> v = leading_number(rest)) {
      out = *v * (rest.find("kB") != std::string_view::npos ? 1024 : 1);
    }
    return false;  // the first line with the key decides
  });
  return out;
}

MemoryInfo parse_meminfo(std::string_view text) {
  return {.total = field_bytes(text, "MemTotal"), .available = field_bytes(text, "MemAvailable")};
}

HugePageMode parse_thp_enabled(std::string_view text) {
  const size_t open = text.find('[');
  if (open == std::string_view::npos) return HugePageMode::kUnavailable;
  const size_t close = text.find(']', open);
  if (close == std::string_view::npos) return HugePageMode::kUnavailable;
  const std::string_view word = text.substr(open + 1, close - open - 1);
  if (word == "always") return HugePageMode::kAlways;
  if (word == "madvise") return HugePageMode::kMadvise;
  if (word == "never") return HugePageMode::kNever;
  return HugePageMode::kUnavailable;
}

RegionPages parse_smaps_entry(std::string_view text, uintptr_t addr) {
  // Each mapping starts with "lo-hi perms offset dev inode [path]", followed by "Key: value
  // kB" lines (a field line has its ':' before any space; a header has none before it).
  RegionPages out;
  bool inside = false;
  for_each_line(text, [&](std::string_view line) {
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    const bool header = dash != std::string_view::npos && space != std::string_view::npos && dash < space &&
                        line.find(':') > space;
    if (header) {
      if (inside) return false;  // past the entry we wanted
      const std::string lo(line.substr(0, dash)), hi(line.substr(dash + 1, space - dash - 1));
      char* end_lo = nullptr;
      char* end_hi = nullptr;
      const uintptr_t a = std::strtoull(lo.c_str(), &end_lo, 16);
      const uintptr_t b = std::strtoull(hi.c_str(), &end_hi, 16);
      inside = !lo.empty() && !hi.empty() && *end_lo == '\0' && *end_hi == '\0' && a <= addr && addr < b;
      return true;
    }
    if (!inside) return true;
    if (auto v = field_bytes(line, "Rss")) out.resident = v;
    if (auto v = field_bytes(line, "AnonHugePages")) out.anon_huge_pages = v;
    if (auto v = field_bytes(line, "FilePmdMapped")) out.file_huge_pages = v;
    return true;
  });
  return out;
}

ProcessMemory parse_process_status(std::string_view text) {
  return {.resident = field_bytes(text, "VmRSS"), .peak_resident = field_bytes(text, "VmHWM")};
}

std::optional<double> stat_busy_seconds(std::string_view text, std::span<const int> cpus, int64_t ticks_per_second) {
  if (ticks_per_second <= 0 || cpus.empty()) return std::nullopt;
  int64_t busy = 0;
  std::vector<bool> seen(cpus.size(), false);
  bool malformed = false;
  for_each_line(text, [&](std::string_view line) {
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') return true;
    std::istringstream in{std::string(line.substr(3))};
    int cpu = -1;
    if (!(in >> cpu)) return !(malformed = true);
    const auto it = std::find(cpus.begin(), cpus.end(), cpu);
    if (it == cpus.end()) return true;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    int64_t v[8];
    for (int64_t& x : v) {
      if (!(in >> x) || x < 0) return !(malformed = true);
    }
    const size_t index = static_cast<size_t>(it - cpus.begin());
    if (seen[index]) return !(malformed = true);
    seen[index] = true;
    busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return true;
  });
  if (malformed || std::find(seen.begin(), seen.end(), false) != seen.end()) return std::nullopt;
  return static_cast<double>(busy) / static_cast<double>(ticks_per_second);
}

std::string cpuinfo_model_name(std::string_view text) {
  std::string out;
  for_each_line(text, [&](std::string_view line) {
    const auto v = cpuinfo_value(line, "model name");
    if (!v) return true;
    out = std::string(*v);
    return false;
  });
  return out;
}

int cpuinfo_core_count(std::string_view text) {
  // Each processor's block names its package ("physical id") before its core ("core id").
  std::set<std::pair<uint64_t, uint64_t>> cores;
  uint64_t package = 0;
  for_each_line(text, [&](std::string_view line) {
    if (const auto v = cpuinfo_value(line, "physical id")) package = leading_number(*v).value_or(0);
    if (const auto v = cpuinfo_value(line, "core id")) cores.insert({package, leading_number(*v).value_or(0)});
    return true;
  });
  return static_cast<int>(cores.size());
}

std::vector<std::vector<int>> cpuinfo_cores(std::string_view text) {
  // Each processor's block starts with its number ("processor") and names its package
  // ("physical id") before its core ("core id").
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int>> by_core;
  std::optional<uint64_t> processor;
  uint64_t package = 0;
  bool malformed = false;
  for_each_line(text, [&](std::string_view line) {
    if (const auto v = cpuinfo_value(line, "processor")) {
      processor = leading_number(*v);
      if (!processor || *processor >= (1u << 20)) return !(malformed = true);
      package = 0;
    }
    if (const auto v = cpuinfo_value(line, "physical id")) package = leading_number(*v).value_or(0);
    if (const auto v = cpuinfo_value(line, "core id")) {
      if (!processor) return !(malformed = true);
      by_core[{package, leading_number(*v).value_or(0)}].push_back(static_cast<int>(*processor));
    }
    return true;
  });
  if (malformed) return {};
  std::vector<std::vector<int>> cores;
  for (auto& [key, cpus] : by_core) {
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    cores.push_back(std::move(cpus));
  }
  std::sort(cores.begin(), cores.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return cores;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  constexpr int64_t kMaxCpu = 1 << 20;  // far beyond any machine; stops a hostile "0-999999999"
  std::set<int> cpus;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    const auto number = [](std::string_view s) -> std::optional<int64_t> {
      if (s.empty() || s.size() > 9) return std::nullopt;
      int64_t v = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
      }
      return v;
    };
    const auto lo = number(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi >= kMaxCpu) return std::nullopt;
    for (int64_t c = *lo; c <= *hi; ++c) cpus.insert(static_cast<int>(c));
    pos = comma + 1;
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string lock_error_message(uint64_t bytes, std::string_view reason, std::string_view limit_text) {
  return fmt::format(
      "cannot lock {} in RAM: {} (locked-memory limit {}); raise it with 'ulimit -l unlimited' (or memlock in "
      "/etc/security/limits.conf)",
      format_bytes(bytes), reason, limit_text);
}

}  // namespace moetier::platform::procfs
