#include "gpu/expert_cache.h"

#include <algorithm>

namespace moetier {

GpuExpertCachePolicy::GpuExpertCachePolicy(int n_expert, int n_slots)
    : expert_slot_(static_cast<size_t>(n_expert), -1),
      slot_expert_(static_cast<size_t>(n_slots), -1),
      slot_last_use_(static_cast<size_t>(n_slots), -1),
      slot_hits_(static_cast<size_t>(n_slots), 0) {}

void GpuExpertCachePolicy::begin_step() { ++step_; }

void GpuExpertCachePolicy::hit(int expert) {
  const int slot = slot_of(expert);
  if (slot < 0) return;
  slot_last_use_[static_cast<size_t>(slot)] = step_;
  ++slot_hits_[static_cast<size_t>(slot)];
}

bool GpuExpertCachePolicy::uploads_pay(const ExpertCacheCosts& costs) const {
  if (hits_per_upload_ < 0) return true;  // not measured yet: fill
  return hits_per_upload_ * costs.cpu_seconds_per_pair >= costs.upload_seconds;
}

std::span<const GpuExpertCachePolicy::Upload> GpuExpertCachePolicy::plan_uploads(std::span<const int> missed,
                                                                                int max_uploads,
                                                                                const ExpertCacheCosts& costs) {
  uploads_.clear();
  const bool free_slot = std::find(slot_expert_.begin(), slot_expert_.end(), -1) != slot_expert_.end();
  if (!free_slot && !uploads_pay(costs)) {
    // Not paying: one probe now and then, so a change (other routing, a warm link) is seen.
    if (last_upload_step_ >= 0 && step_ - last_upload_step_ < kProbeSteps) return {};
    max_uploads = std::min(max_uploads, 1);
  }
  for (const int expert : missed) {
    if (static_cast<int>(uploads_.size()) >= max_uploads) break;
    if (slot_of(expert) >= 0) continue;
    // A free slot, else the least recently used one this step did not read.
    int victim = -1;
    for (int s = 0; s < n_slots(); ++s) {
      const auto i = static_cast<size_t>(s);
      if (slot_expert_[i] < 0) {
        victim = s;
        break;
      }
      if (slot_last_use_[i] == step_) continue;
      if (victim < 0 || slot_last_use_[i] < slot_last_use_[static_cast<size_t>(victim)]) victim = s;
    }
    if (victim < 0) break;
    const auto v = static_cast<size_t>(victim);
    if (slot_expert_[v] >= 0) {
      const auto hits = static_cast<double>(slot_hits_[v]);
      hits_per_upload_ = hits_per_upload_ < 0 ? hits : 0.9 * hits_per_upload_ + 0.1 * hits;
      expert_slot_[static_cast<size_t>(slot_expert_[v])] = -1;
    }
    slot_expert_[v] = expert;
    expert_slot_[static_cast<size_t>(expert)] = victim;
    slot_last_use_[v] = step_;  // not evicted by the next upload of this same step
    slot_hits_[v] = 0;
    uploads_.push_back({.expert = expert, .slot = victim});
  }
  if (!uploads_.empty()) last_upload_step_ = step_;
  return uploads_;
}

}  // namespace moetier
