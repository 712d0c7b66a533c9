#include "engine/plan_table.h"

namespace moetier {

std::vector<PlanBlockGroup> plan_block_groups(const Plan& plan) {
  std::vector<PlanBlockGroup> groups;
  for (const auto& l : plan.layers) {
    if (groups.empty() || groups.back().dense != l.dense || groups.back().experts != l.experts ||
        groups.back().mtp != l.mtp) {
      groups.push_back({.first = l.layer, .last = l.layer, .mtp = l.mtp, .dense = l.dense, .experts = l.experts});
    }
    PlanBlockGroup& g = groups.back();
    g.last = l.layer;
    (l.kind == LayerKind::kAttention ? g.n_attention : g.n_deltanet) += 1;
    g.dense_bytes += l.dense_bytes;
    g.expert_bytes += l.expert_bytes;
    g.kv_bytes += l.kv_bytes;
    g.state_bytes += l.state_bytes;
  }
  return groups;
}

}  // namespace moetier
