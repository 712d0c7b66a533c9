#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace moetier {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOncePerJob) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> calls(3);
  for (int job = 0; job < 2000; ++job) {
    pool.run([&](int t) { calls[static_cast<size_t>(t)].fetch_add(1); });
  }
  for (auto& c : calls) EXPECT_EQ(c.load(), 2000);
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(2);
  for (int64_t n : {1, 2, 3, 17, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1) << "n=" << n;
  }
}

TEST(ThreadPool, BarrierSeparatesPhases) {
  // Phase p: every thread writes its slot to p, barrier, then checks every slot is p.
  // Without a working barrier a thread would see a neighbour still at p - 1.
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    std::vector<std::atomic<int>> slot(static_cast<size_t>(n_threads));
    std::atomic<int> errors{0};
    pool.run([&](int t) {
      for (int phase = 1; phase <= 500; ++phase) {
        slot[static_cast<size_t>(t)].store(phase);
        pool.barrier();
        for (auto& s : slot) {
          if (s.load() != phase) errors.fetch_add(1);
        }
        pool.barrier();
      }
    });
    EXPECT_EQ(errors.load(), 0) << n_threads << " threads";
  }
}

TEST(ThreadPool, IdleWorkersSleepAndWakeForLaterJobs) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.run([&](int t) { sum.fetch_add(t + 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin window
  pool.run([&](int t) { sum.fetch_add(t + 1); });
  EXPECT_EQ(sum.load(), 6);
}

}  // namespace
}  // namespace moetier
