// What a stretch of GPU work cost, as counted by the GPU backend while it records and
// submits: the numbers that decide speed on a real GPU (memory traffic, dispatches, barriers,
// submissions and host waits), countable on any device, lavapipe included. GPU time per
// shader comes from timestamps when they are on (bench --profile) and the device has them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace moetier {

struct GpuCensus {
  uint64_t dispatches = 0;
  uint64_t barriers = 0;
  uint64_t transfers = 0;       // copy and fill commands
  uint64_t submits = 0;
  uint64_t host_waits = 0;      // times the host had to wait for the GPU (the work was not done yet)
  uint64_t syncs = 0;           // fence waits, including those that found the work already done
  uint64_t bytes_up = 0;        // host → device (staged uploads)
  uint64_t bytes_down = 0;      // device → host
  uint64_t weight_bytes = 0;    // weight bytes the recorded matmuls read (experts by pair: an upper bound)
  struct Op {
    uint64_t dispatches = 0;
    double gpu_ns = 0;          // 0 without timestamps
    uint64_t weight_bytes = 0;  // weights its dispatches read (matmul shaders)
  };
  std::map<std::string, Op, std::less<>> ops;  // by shader variant name
  bool timed = false;           // gpu_ns were measured

  void add(const GpuCensus& o) {
    dispatches += o.dispatches;
    barriers += o.barriers;
    transfers += o.transfers;
    submits += o.submits;
    host_waits += o.host_waits;
    syncs += o.syncs;
    bytes_up += o.bytes_up;
    bytes_down += o.bytes_down;
    weight_bytes += o.weight_bytes;
    for (const auto& [name, op] : o.ops) {
      auto& mine = ops[name];
      mine.dispatches += op.dispatches;
      mine.gpu_ns += op.gpu_ns;
      mine.weight_bytes += op.weight_bytes;
    }
    timed = timed || o.timed;
  }
};

// The VRAM expert cache (gpu/expert_cache.h) since the load: counters, so a window is a
// difference of two readings.
struct GpuExpertCacheStats {
  int64_t pairs = 0;        // routed (token, expert) pairs of the layers that have a cache
  int64_t gpu_pairs = 0;    // of them, computed from a copy in VRAM
  int64_t uploads = 0;      // experts copied to VRAM
  uint64_t upload_bytes = 0;
  double hits_per_upload = -1;  // hits a copy got before eviction, averaged over layers (−1: none yet)
  double hit_rate() const { return pairs > 0 ? static_cast<double>(gpu_pairs) / static_cast<double>(pairs) : 0; }
};
inline GpuExpertCacheStats operator-(GpuExpertCacheStats b, const GpuExpertCacheStats& a) {
  b.pairs -= a.pairs;
  b.gpu_pairs -= a.gpu_pairs;
  b.uploads -= a.uploads;
  b.upload_bytes -= a.upload_bytes;
  return b;
}

}  // namespace moetier
