#include "core/profiler.h"

namespace moetier {

std::string_view profile_block_name(ProfileBlock block) {
  switch (block) {
    case ProfileBlock::kEmbedding: return "embedding";
    case ProfileBlock::kNorm: return "norm+add";
    case ProfileBlock::kAttention: return "attention";
    case ProfileBlock::kDeltaNet: return "delta_net";
    case ProfileBlock::kMoeRouter: return "moe_router";
    case ProfileBlock::kMoeExperts: return "moe_experts";
    case ProfileBlock::kSharedExpert: return "shared_expert";
    case ProfileBlock::kLmHead: return "lm_head";
    case ProfileBlock::kCount: break;
  }
  return "?";
}

}  // namespace moetier
