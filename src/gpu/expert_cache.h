// The VRAM expert cache's bookkeeping for one layer (the GPU backend holds the copies): which
// routed experts have a copy in which of the layer's slots, and which experts to copy after a
// step. Pure: no GPU, tested on its own.
//
// A step's pairs whose expert has a copy are computed on the GPU while the CPU computes the
// rest, so a miss never stalls the GPU. After the step, experts that missed are copied into
// the least recently used slots the step did not read, at most `max_uploads` per step, and
// only while copies pay: an upload costs `upload_seconds` of the host-to-GPU link, and each
// later hit on the copy saves the CPU `cpu_seconds_per_pair`. What a copy earns is measured
// (its hits until it is evicted, averaged); until the first evictions the cache fills. When
// copies stop paying (a slow link such as an eGPU on PCIe 3.0 x4, or routing with little
// reuse) one upload per `kProbeSteps` steps keeps the measurement current.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace moetier {

struct ExpertCacheCosts {
  double upload_seconds = 0;        // one expert's gate + up + down, host → GPU (measured)
  double cpu_seconds_per_pair = 0;  // the CPU's time for one (token, expert) pair (measured)
};

class GpuExpertCachePolicy {
 public:
  static constexpr int64_t kProbeSteps = 32;

  GpuExpertCachePolicy(int n_expert, int n_slots);

  int n_slots() const { return static_cast<int>(slot_expert_.size()); }
  // The slot holding `expert`, or −1.
  int slot_of(int expert) const { return expert_slot_[static_cast<size_t>(expert)]; }
  int expert_in(int slot) const { return slot_expert_[static_cast<size_t>(slot)]; }

  // One step: begin_step(), then hit() for each pair computed from a copy (marks its slot
  // used by this step), then plan_uploads() with the experts that missed.
  void begin_step();
  void hit(int expert);
  struct Upload {
    int expert = 0;
    int slot = 0;
  };
  // The copies to make now (the slots are reassigned at once): experts of `missed` (distinct,
  // most wanted first) into free slots, then into the least recently used slots not used by
  // this step, at most max_uploads, while copies pay under `costs`.
  std::span<const Upload> plan_uploads(std::span<const int> missed, int max_uploads, const ExpertCacheCosts& costs);

  // Whether copies pay under `costs` at the measured hits per copy (true until measured).
  bool uploads_pay(const ExpertCacheCosts& costs) const;
  // Hits a copy got before it was evicted, averaged (exponentially, over recent evictions);
  // −1 before the first eviction.
  double hits_per_upload() const { return hits_per_upload_; }

 private:
  std::vector<int> expert_slot_;      // [n_expert] slot or −1
  std::vector<int> slot_expert_;      // [n_slots] expert or −1
  std::vector<int64_t> slot_last_use_;  // step of the last hit (or the upload)
  std::vector<int64_t> slot_hits_;      // hits since the copy was made
  std::vector<Upload> uploads_;
  int64_t step_ = 0;
  int64_t last_upload_step_ = -1;
  double hits_per_upload_ = -1;
};

}  // namespace moetier
