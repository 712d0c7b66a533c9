// The machine's memory read bandwidth, measured the way decoding reads weights: every
// thread of the pool streams its own slice of a buffer much larger than the caches. This
// is the yardstick for "decode reaches X% of the machine's read bandwidth".
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace moetier::cpu {

struct BandwidthParams {
  int64_t buffer_bytes = int64_t{1} << 30;  // 1 GiB: far beyond any last-level cache
  int passes = 5;                           // timed passes; the best one is reported
};

struct BandwidthResult {
  double best_gbps = 0;    // 1e9 bytes per second, fastest pass
  double median_gbps = 0;
};

// Allocates and touches the buffer first (not timed), then times `passes` full reads.
BandwidthResult measure_read_bandwidth(const BandwidthParams& params, ThreadPool& pool);

}  // namespace moetier::cpu
