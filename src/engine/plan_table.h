// The plan as a table: consecutive blocks with the same placement summed into one row,
// the data `inspect --plan` and the load line render.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan.h"

namespace moetier {

// Blocks [first, last] with the same devices for their dense part and their experts.
struct PlanBlockGroup {
  int first = 0, last = 0;
  bool mtp = false;
  std::string dense, experts;
  int64_t n_attention = 0, n_deltanet = 0;
  int64_t dense_bytes = 0, expert_bytes = 0, kv_bytes = 0, state_bytes = 0;
};

std::vector<PlanBlockGroup> plan_block_groups(const Plan& plan);

}  // namespace moetier
