// --expert-pages: whether the default load (mmap) moves the routed-expert tensors out of
// the file mapping into anonymous memory backed by transparent huge pages (THP).
//
// Why: decoding reads a few scattered expert rows from every layer per token, so it is
// bound by memory latency and TLB reach. Page-cache pages of a mapped file are 4 KiB each
// (a 17 GiB expert set is 4.5 million pages, far past any TLB), while anonymous memory with
// asking the OS for huge pages (Linux: MADV_HUGEPAGE) gets 2 MiB pages: --no-mmap was much faster than mmap for exactly
// this reason. The routed experts are ~95% of a MoE file and the only part read at random,
// so moving just them gives mmap --no-mmap's speed; the dense tensors stay mapped.
//
// This header holds the decision as a pure function (unit-tested without touching the
// system); what feeds it (available RAM, the huge-page mode, the pages a region got) comes
// from platform/memory.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "platform/memory.h"

namespace moetier::gguf {

enum class ExpertPages {
  kAuto,  // move when RAM allows (and THP is on); otherwise keep the mapping and say why
  kHuge,  // move, or fail with a clear error when the experts cannot fit in available RAM
  kFile,  // keep the file mapping (page-cache pages, shared, evictable)
};

// "auto" / "huge" / "file"; anything else is kBadInput naming --expert-pages.
Result<ExpertPages> parse_expert_pages(std::string_view text);
std::string_view expert_pages_name(ExpertPages mode);

// Everything the decision depends on. Sizes in bytes.
struct ExpertPagesQuery {
  ExpertPages policy = ExpertPages::kAuto;
  uint64_t expert_bytes = 0;   // routed-expert tensors the CPU computes with (what would move)
  uint64_t mapped_bytes = 0;   // the rest of the tensor data, which stays mapped and resident
  uint64_t working_bytes = 0;  // KV cache, recurrent state and compute scratch the CPU will allocate
  platform::MemoryInfo mem;
  platform::HugePageMode thp = platform::HugePageMode::kMadvise;
  // The OS's words for huge pages and how to get them, for the messages (tests pass another
  // OS's to check its text).
  platform::HugePageHelp help = platform::huge_page_help();
};

struct ExpertPagesDecision {
  bool move = false;
  Status error;            // kHuge that cannot be honoured: the load fails with this
  // When there is something to move but it is not moved: why (a clause), and what the user
  // can do ("" = nothing). kept_message() makes the line.
  std::string reason;
  std::string advice;
  uint64_t needed_bytes = 0;     // auto's requirement (experts + mapped + working + reserve)
  uint64_t reserve_bytes = 0;    // the reserve part of it
};

// The RAM rule (auto): move when
//     expert_bytes + mapped_bytes + working_bytes + reserve <= MemAvailable,
//     reserve = max(1 GiB, MemTotal / 32).
// Why this shape:
//   * MemAvailable already counts reclaimable page cache, including this file's own cached
//     pages; the move drops the experts' cached pages as it copies them, so they are not
//     counted twice (no separate credit for them).
//   * The moved copy is anonymous memory: it cannot be evicted (no swap on such machines),
//     so an overshoot ends in the OOM killer rather than in slower paging. Hence the whole
//     working set must fit: the copy, the dense tensors that stay mapped (read every token;
//     evicting them would make decoding read the disk), and the KV cache/state/scratch the
//     session allocates next.
//   * The reserve keeps room for the kernel's watermarks, the page cache other programs use
//     and their growth: 1 GiB, or 1/32 of RAM on big machines (4 GiB of 128 GiB).
// huge moves whenever the experts alone fit in MemAvailable (the user takes the risk for the
// rest) and errors otherwise; file never moves. Without THP (never/unavailable) auto keeps
// the mapping: a copy would get 4 KiB pages as well and gain nothing; huge still moves.
// With nothing to move (all experts on the GPU, a dense model) there is nothing to say.
ExpertPagesDecision decide_expert_pages(const ExpertPagesQuery& q);

// The line printed when the experts stay mapped: the reason, what it costs, the advice. The
// cost depends on the pages the kernel gave the mapping: page-cache folios of some kernels
// and filesystems (e.g. ext4 on Linux 6.1x) are up to 2 MiB and mapped with 2 MiB entries,
// others are 4 KiB. file_pmd_fraction = FilePmdMapped / Rss of the populated mapping
// (nullopt: unknown, e.g. not prefaulted).
std::string kept_message(const ExpertPagesDecision& d, std::optional<double> file_pmd_fraction);

// The line printed after a move, e.g. "moved 17.3 GiB of routed experts into huge-page
// memory in 4.1 s (4.5 GB/s; THP: 98% in 2 MiB pages)". huge_page_bytes: AnonHugePages of
// the region (nullopt: unknown, not shown).
std::string moved_message(uint64_t bytes, double seconds, platform::HugePageMode thp,
                          std::optional<uint64_t> huge_page_bytes, bool locked,
                          const platform::HugePageHelp& help = platform::huge_page_help());

// The line printed when --no-mmap reads the weights into memory that gets no huge pages
// (thp is never or unavailable): what that costs and how to get them; "" when thp gives them.
std::string read_without_huge_pages_message(platform::HugePageMode thp,
                                            const platform::HugePageHelp& help = platform::huge_page_help());

}  // namespace moetier::gguf
