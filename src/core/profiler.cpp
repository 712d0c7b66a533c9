#include "core/profiler.h"

#include <fmt/format.h>

namespace moetier {

std::string_view profile_block_name(ProfileBlock block) {
  switch (block) {
    case ProfileBlock::kEmbedding: return "embedding";
    case ProfileBlock::kNorm: return "norm+add";
    case ProfileBlock::kAttention: return "attention";
    case ProfileBlock::kDeltaNet: return "delta_net";
    case ProfileBlock::kDeltaRule: return "delta_rule";
    case ProfileBlock::kMoeRouter: return "moe_router";
    case ProfileBlock::kMoeExperts: return "moe_experts";
    case ProfileBlock::kMoeExpertWait: return "expert_wait";
    case ProfileBlock::kLmHead: return "lm_head";
    case ProfileBlock::kCount: break;
  }
  return "?";
}

std::string format_profile(const Profiler& profiler) {
  const double total_ms = static_cast<double>(profiler.total_ns()) / 1e6;
  std::string out = fmt::format("{:<14} {:>10} {:>7} {:>9}\n", "block", "ms", "share", "calls");
  for (int b = 0; b < static_cast<int>(ProfileBlock::kCount); ++b) {
    const auto block = static_cast<ProfileBlock>(b);
    const auto& e = profiler.entry(block);
    if (e.calls == 0) continue;
    const double ms = static_cast<double>(e.ns) / 1e6;
    out += fmt::format("{:<14} {:>10.1f} {:>6.1f}% {:>9}\n", profile_block_name(block), ms,
                       total_ms > 0 ? 100.0 * ms / total_ms : 0.0, e.calls);
  }
  out += fmt::format("{:<14} {:>10.1f}\n", "total", total_ms);
  return out;
}

}  // namespace moetier
