// How many of each layer's routed experts stay in RAM when the CPU's experts do not all fit:
// a pure function of the budget and the sizes (tested without a model or a machine), used
// by the load (engine/expert_store.h) and printed by `inspect --plan --ram-budget`.
//
// The RAM the process may use is --ram-budget, or else what the OS has available at load
// less a reserve for everything else (max(1 GiB, RAM / 32), gguf/expert_pages.h). Out of it
// come first the weights that must stay in memory (the CPU's dense tensors, read every
// token) and the working memory (KV cache, state, scratch); the rest holds experts. When
// every CPU expert fits, nothing is streamed (the load keeps today's behaviour). Otherwise
// each layer keeps the same fraction of its experts (a token reads the same share of every
// layer), at least 3 · n_expert_used of them: one batch's pins, the reads ahead, and room
// for a prompt batch's waves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace moetier {

struct ExpertTierLayer {
  int layer = 0;
  int64_t n_expert = 0;
  int64_t expert_bytes = 0;  // one expert's gate + up + down
};

struct ExpertTierQuery {
  std::vector<ExpertTierLayer> layers;  // the layers whose routed experts the CPU computes
  int64_t n_expert_used = 0;
  int64_t resident_bytes = 0;  // CPU weights other than these experts, kept in memory
  int64_t working_bytes = 0;   // KV cache, recurrent state, scratch on the CPU side
  int64_t ram_budget_bytes = 0;   // --ram-budget (0: not given)
  int64_t available_bytes = 0;    // the OS's available memory at load (used without a budget)
  int64_t total_ram_bytes = 0;    // for the reserve
};

struct ExpertTiers {
  bool stream = false;           // some experts are read from the file on demand
  std::vector<int> capacity;     // per query layer: experts kept in memory
  int64_t budget_bytes = 0;      // the RAM the plan used (budget or available − reserve)
  int64_t cache_bytes = 0;       // of it, for experts
  int64_t expert_bytes = 0;      // all the CPU's routed experts
  int64_t experts_in_ram = 0, experts_total = 0;
  Status error;                  // the budget cannot hold even the minimum
  // One line: "routed experts: 61% in RAM (2.1 of 3.4 GiB, LRU cache), the rest read from
  // the file on demand" or why everything stays in RAM.
  std::string summary;
};

int64_t expert_tier_reserve_bytes(int64_t total_ram_bytes);
ExpertTiers plan_expert_tiers(const ExpertTierQuery& q);

// The VRAM tier: GPU memory left after the plan (or --gpu-expert-cache MiB) holds copies of
// recently routed experts of the layers whose dense part is on the GPU and whose routed
// experts stay on the CPU (gpu/expert_cache.h decides which). Every such layer gets the same
// number of slots (a token routes to the same number of experts in each), at most n_expert.
struct GpuExpertCacheQuery {
  std::vector<ExpertTierLayer> layers;  // GPU-dense layers with CPU experts
  int64_t requested_bytes = -1;  // --gpu-expert-cache: -1 auto (what is left), 0 off, else this
  // GPU memory left beyond the plan and the --fit margin (−1: unknown, e.g. no budget known).
  int64_t available_bytes = -1;
};

struct GpuExpertCache {
  std::vector<int> layers;       // the query's layers that get slots
  std::vector<int> slots;        // per entry of `layers`
  int64_t bytes = 0;             // slots × expert bytes, all layers
  int64_t slots_total = 0, experts_total = 0;
  // One line: "VRAM expert cache: 24 of 256 experts per layer (9%, 1.2 GiB, what --fit
  // leaves)" or why there is none; "" when nothing was asked and nothing qualifies.
  std::string summary;
  bool on() const { return slots_total > 0; }
};

GpuExpertCache plan_gpu_expert_cache(const GpuExpertCacheQuery& q);

}  // namespace moetier
