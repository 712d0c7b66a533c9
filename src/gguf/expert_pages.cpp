#include "gguf/expert_pages.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/format.h"

namespace moetier::gguf {
namespace {

using platform::HugePageMode;

constexpr uint64_t kGiB = 1ull << 30;

// What 4 KiB pages cost generation: decode of Qwen3-30B-A3B Q4_K_M with the experts in a
// 4 KiB-page file mapping ran at 0.58x of llama.cpp, against ~1.2x with --no-mmap's 2 MiB
// pages (README). "Up to": a machine with a larger TLB, or a kernel that maps the page cache
// with 2 MiB folios (Linux 6.18 with ext4 in the 2-core test VM: then no difference was
// measurable, docs/benchmarking.md), loses less.
constexpr const char* kCost = "generation may be up to ~40% slower than with huge pages";

}  // namespace

Result<ExpertPages> parse_expert_pages(std::string_view text) {
  if (text == "auto") return ExpertPages::kAuto;
  if (text == "huge") return ExpertPages::kHuge;
  if (text == "file") return ExpertPages::kFile;
  return Status::bad_input(fmt::format("--expert-pages takes auto, huge or file, not '{}'", text));
}

std::string_view expert_pages_name(ExpertPages mode) {
  switch (mode) {
    case ExpertPages::kAuto: return "auto";
    case ExpertPages::kHuge: return "huge";
    case ExpertPages::kFile: return "file";
  }
  return "?";
}

ExpertPagesDecision decide_expert_pages(const ExpertPagesQuery& q) {
  ExpertPagesDecision d;
  if (q.expert_bytes == 0) return d;  // nothing the CPU reads at random: nothing to say
  const bool thp_on = q.thp == HugePageMode::kAlways || q.thp == HugePageMode::kMadvise;
  const uint64_t total = q.mem.total.value_or(0);
  d.reserve_bytes = std::max<uint64_t>(kGiB, total / 32);
  d.needed_bytes = q.expert_bytes + q.mapped_bytes + q.working_bytes + d.reserve_bytes;
  const std::string experts = format_bytes(q.expert_bytes);

  switch (q.policy) {
    case ExpertPages::kFile:
      d.reason = fmt::format("the CPU's weights ({}) stay in the file mapping (--expert-pages file)", experts);
      d.advice = "--expert-pages auto moves them when RAM allows";
      return d;
    case ExpertPages::kHuge:
      if (q.mem.available && q.expert_bytes > *q.mem.available) {
        d.error = Status::runtime(fmt::format(
            "--expert-pages huge: the CPU's weights need {} of memory but only {} is available ({}); "
            "free RAM, or use --expert-pages auto to keep them in the file mapping",
            experts, format_bytes(*q.mem.available), q.help.available));
        return d;
      }
      d.move = true;
      return d;
    case ExpertPages::kAuto:
      break;
  }
  // Without huge pages the copy gets 4 KiB pages like the mapping, but it is still worth
  // making: only a copy is repacked into the kernels' tile layout (the mapping is read-only),
  // and that layout was measured 2-4x faster for generation than the file's own.
  const std::string_view target = thp_on ? "huge-page memory" : "anonymous memory";
  if (!q.mem.available) {
    d.reason = fmt::format(
        "the CPU's weights ({}) stay in the file mapping: available memory is unknown (no {})", experts,
        q.help.available);
    d.advice = "--expert-pages huge moves them anyway";
    return d;
  }
  if (d.needed_bytes > *q.mem.available) {
    d.reason = fmt::format(
        "the CPU's weights stay in the file mapping: moving them into {} needs {} ({} CPU weights + {} "
        "other weights + {} KV cache and scratch + {} reserve) but {} is available",
        target, format_bytes(d.needed_bytes), experts, format_bytes(q.mapped_bytes), format_bytes(q.working_bytes),
        format_bytes(d.reserve_bytes), format_bytes(*q.mem.available));
    // huge still works when the experts alone fit; say so then.
    d.advice = q.expert_bytes <= *q.mem.available
                   ? "free RAM, or force the move with --expert-pages huge (risking the OOM killer)"
                   : (thp_on ? "free RAM to get huge pages" : "free RAM");
    return d;
  }
  d.move = true;
  return d;
}

std::string kept_message(const ExpertPagesDecision& d, std::optional<double> file_pmd_fraction) {
  std::string cost;
  if (!file_pmd_fraction) {
    cost = fmt::format("page-cache pages are usually 4 KiB: {}", kCost);
  } else if (*file_pmd_fraction >= 0.9) {
    cost = fmt::format("this kernel maps {:.0f}% of the file with 2 MiB page-cache folios, so little speed is lost",
                       100 * *file_pmd_fraction);
  } else {
    cost = fmt::format("{:.0f}% of the mapping is in 4 KiB pages: {}", 100 * (1 - *file_pmd_fraction), kCost);
  }
  return d.reason + "; " + cost + (d.advice.empty() ? "" : "; " + d.advice);
}

std::string moved_message(uint64_t bytes, double seconds, HugePageMode thp, std::optional<uint64_t> huge_page_bytes,
                          bool locked, const platform::HugePageHelp& help) {
  const double gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  std::string pages;
  if (thp == HugePageMode::kNever || thp == HugePageMode::kUnavailable) {
    pages = fmt::format("{} {}: 4 KiB pages", help.short_name,
                        thp == HugePageMode::kNever ? "disabled system-wide" : "unavailable");
  } else if (huge_page_bytes && bytes > 0) {
    const double pct = 100.0 * static_cast<double>(std::min(*huge_page_bytes, bytes)) / static_cast<double>(bytes);
    pages = fmt::format("{}: {:.0f}% in 2 MiB pages", help.short_name, pct);
  } else {
    pages = fmt::format("{} coverage unknown", help.short_name);
  }
  const bool huge = thp == HugePageMode::kAlways || thp == HugePageMode::kMadvise;
  // Without huge pages: what that costs and how to get them, on the same line.
  const std::string missing = huge ? "" : fmt::format("; {}; {}", kCost, help.enable);
  return fmt::format("moved {} of the CPU's weights into {} memory in {:.1f} s ({:.1f} GB/s; {}{}){}", format_bytes(bytes),
                     huge ? "huge-page" : "anonymous", seconds, gbps, pages, locked ? "; locked" : "", missing);
}

std::string read_without_huge_pages_message(HugePageMode thp, const platform::HugePageHelp& help) {
  if (thp == HugePageMode::kAlways || thp == HugePageMode::kMadvise) return "";
  return fmt::format("--no-mmap: the weights are in 4 KiB pages: {} are {} ({}); {}; {}", help.name,
                     thp == HugePageMode::kNever ? "disabled system-wide (never)" : "unavailable", help.setting,
                     kCost, help.enable);
}

}  // namespace moetier::gguf
