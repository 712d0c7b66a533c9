#include "cpu/membw.h"

#include <gtest/gtest.h>

namespace moetier::cpu {
namespace {

TEST(MemoryBandwidth, MeasuresPositiveOrderedFigures) {
  ThreadPool pool(2);
  const auto bw = measure_read_bandwidth({.buffer_bytes = 32 << 20, .passes = 3}, pool);
  EXPECT_GT(bw.median_gbps, 0.0);
  EXPECT_GE(bw.best_gbps, bw.median_gbps);
  EXPECT_LT(bw.best_gbps, 10000.0);  // 10 TB/s: no CPU reads that fast; a unit slip would
}

}  // namespace
}  // namespace moetier::cpu
