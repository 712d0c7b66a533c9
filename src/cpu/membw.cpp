#include "cpu/membw.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace moetier::cpu {

BandwidthResult measure_read_bandwidth(const BandwidthParams& params, ThreadPool& pool) {
  const int64_t words = params.buffer_bytes / static_cast<int64_t>(sizeof(uint64_t));
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[static_cast<size_t>(words)]);
  // Touch every page from the thread that will read it (first-touch placement).
  pool.parallel_for(words, 4096, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) buffer[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()));
  std::vector<double> gbps;
  for (int pass = 0; pass < std::max(1, params.passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(words, 4096, [&](int64_t begin, int64_t end, int thread) {
      // 8 independent xor chains: vectorisable, and the loads never wait on each other.
      uint64_t acc[8] = {};
      int64_t i = begin;
      for (; i + 8 <= end; i += 8) {
        for (int l = 0; l < 8; ++l) acc[l] ^= buffer[static_cast<size_t>(i + l)];
      }
      for (; i < end; ++i) acc[0] ^= buffer[static_cast<size_t>(i)];
      uint64_t x = 0;
      for (uint64_t a : acc) x ^= a;
      sinks[static_cast<size_t>(thread)] ^= x;  // keeps the reads alive
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gbps.push_back(static_cast<double>(params.buffer_bytes) / seconds / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sinks) keep = keep ^ s;
  std::sort(gbps.begin(), gbps.end());
  return {.best_gbps = gbps.back(), .median_gbps = gbps[gbps.size() / 2]};
}

}  // namespace moetier::cpu
