#include "engine/expert_tiers.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/format.h"

namespace moetier {

int64_t expert_tier_reserve_bytes(int64_t total_ram_bytes) { return std::max<int64_t>(1ll << 30, total_ram_bytes / 32); }

ExpertTiers plan_expert_tiers(const ExpertTierQuery& q) {
  ExpertTiers t;
  for (const ExpertTierLayer& l : q.layers) {
    t.expert_bytes += l.n_expert * l.expert_bytes;
    t.experts_total += l.n_expert;
  }
  t.budget_bytes = q.ram_budget_bytes > 0 ? q.ram_budget_bytes
                                          : q.available_bytes - expert_tier_reserve_bytes(q.total_ram_bytes);
  const int64_t for_experts = t.budget_bytes - q.resident_bytes - q.working_bytes;
  const std::string source = q.ram_budget_bytes > 0 ? "--ram-budget" : "available memory less a reserve";
  if (t.experts_total == 0 || for_experts >= t.expert_bytes) {
    for (const ExpertTierLayer& l : q.layers) t.capacity.push_back(static_cast<int>(l.n_expert));
    t.cache_bytes = t.expert_bytes;
    t.experts_in_ram = t.experts_total;
    return t;
  }
  t.stream = true;
  // The same fraction of every layer, rounded down, at least the minimum.
  const double fraction = std::max(0.0, static_cast<double>(for_experts) / static_cast<double>(t.expert_bytes));
  int64_t minimum_bytes = 0;
  for (const ExpertTierLayer& l : q.layers) {
    const int64_t minimum = std::min(l.n_expert, 3 * q.n_expert_used);
    minimum_bytes += minimum * l.expert_bytes;
    const auto n = static_cast<int64_t>(std::floor(fraction * static_cast<double>(l.n_expert)));
    const int64_t capacity = std::clamp(n, minimum, l.n_expert);
    t.capacity.push_back(static_cast<int>(capacity));
    t.cache_bytes += capacity * l.expert_bytes;
    t.experts_in_ram += capacity;
  }
  if (minimum_bytes > for_experts) {
    t.error = Status::bad_input(fmt::format(
        "the routed experts need at least {} of RAM for a cache ({} per layer), but {} ({}) leaves {} after the {} of "
        "weights that stay in memory and {} of KV cache and buffers; raise --ram-budget, free memory, or use a "
        "smaller context (-c)",
        format_bytes(static_cast<uint64_t>(minimum_bytes)), 3 * q.n_expert_used, format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, t.budget_bytes))),
        source, format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, for_experts))),
        format_bytes(static_cast<uint64_t>(q.resident_bytes)), format_bytes(static_cast<uint64_t>(q.working_bytes))));
  }
  t.summary = fmt::format(
      "routed experts: {} of {} in RAM ({:.0f}%, {} of {}; {} {}), the rest read from the file on demand",
      t.experts_in_ram, t.experts_total, 100.0 * static_cast<double>(t.experts_in_ram) / static_cast<double>(t.experts_total),
      format_bytes(static_cast<uint64_t>(t.cache_bytes)), format_bytes(static_cast<uint64_t>(t.expert_bytes)),
      format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, t.budget_bytes))), source);
  return t;
}

GpuExpertCache plan_gpu_expert_cache(const GpuExpertCacheQuery& q) {
  GpuExpertCache c;
  int64_t per_slot_row = 0;  // bytes of one slot in every layer
  for (const ExpertTierLayer& l : q.layers) {
    per_slot_row += l.expert_bytes;
    c.experts_total += l.n_expert;
  }
  if (q.requested_bytes == 0) return c;
  if (q.layers.empty() || per_slot_row <= 0) {
    if (q.requested_bytes > 0) {
      c.summary = "--gpu-expert-cache: no layer has its dense part on the GPU and its routed experts on the CPU; no VRAM "
                  "expert cache";
    }
    return c;
  }
  const bool asked = q.requested_bytes > 0;
  const int64_t bytes = asked ? q.requested_bytes : q.available_bytes;
  if (bytes <= 0) return c;  // auto with nothing left (or unknown): no cache, nothing to say
  int64_t n_expert_max = 0;
  for (const ExpertTierLayer& l : q.layers) n_expert_max = std::max(n_expert_max, l.n_expert);
  const int64_t slots = std::min(bytes / per_slot_row, n_expert_max);
  if (slots <= 0) {
    if (asked) {
      c.summary = fmt::format("--gpu-expert-cache {}: less than one expert per layer ({} for the {} layers); no VRAM "
                              "expert cache",
                              format_bytes(static_cast<uint64_t>(bytes)), format_bytes(static_cast<uint64_t>(per_slot_row)),
                              q.layers.size());
    }
    return c;
  }
  for (const ExpertTierLayer& l : q.layers) {
    const int64_t n = std::min(slots, l.n_expert);
    c.layers.push_back(l.layer);
    c.slots.push_back(static_cast<int>(n));
    c.slots_total += n;
    c.bytes += n * l.expert_bytes;
  }
  c.summary = fmt::format("VRAM expert cache: {} of {} routed experts per layer in {} layers ({:.0f}%, {}; {})", slots,
                          n_expert_max, q.layers.size(),
                          100.0 * static_cast<double>(c.slots_total) / static_cast<double>(c.experts_total),
                          format_bytes(static_cast<uint64_t>(c.bytes)),
                          asked ? "--gpu-expert-cache" : "the GPU memory the plan leaves");
  return c;
}

}  // namespace moetier
