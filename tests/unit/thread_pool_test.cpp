#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
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

// Jobs spaced around the time workers spin before they sleep, so that jobs arrive while
// workers are falling asleep, asleep, or just waking: every job must still reach every
// thread (a lost wake-up hangs here).
TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> calls(3);
  constexpr int kJobs = 300;
  for (int job = 0; job < kJobs; ++job) {
    const int64_t gap_ns = ThreadPool::kSpinNanoseconds - 20'000 + (job % 7) * 10'000;
    std::this_thread::sleep_for(std::chrono::nanoseconds(gap_ns));
    pool.run([&](int t) { calls[static_cast<size_t>(t)].fetch_add(1); });
  }
  for (auto& c : calls) EXPECT_EQ(c.load(), kJobs);
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

TEST(ThreadPool, BalancedForCoversRangeExactlyOnceInChunks) {
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    for (int64_t n : {1, 2, 3, 17, 1000, 4099}) {
      for (int64_t chunk : {1, 7, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> oversized{0};
        pool.parallel_for_balanced(n, chunk, [&](int64_t b, int64_t e, int) {
          if (e - b > chunk || e <= b) oversized.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << n_threads << " threads, n=" << n << ", chunk=" << chunk;
        EXPECT_EQ(oversized.load(), 0);
      }
    }
  }
}

// Thread 1 stalls in its first chunk (as a core shared with another process would) until
// thread 0 has taken work from thread 1's range; without that, it gives up after 10 s
// and the test fails instead of hanging.
TEST(ThreadPool, BalancedForMovesWorkFromAStalledThread) {
  ThreadPool pool(2);
  constexpr int64_t kN = 64, kChunk = 4;
  std::mutex mu;
  std::vector<std::pair<int, int64_t>> calls;  // (thread, begin), in the order they began
  std::atomic<bool> taken{false};
  pool.parallel_for_balanced(kN, kChunk, [&](int64_t b, int64_t, int t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.emplace_back(t, b);
    }
    if (t == 0 && b >= kN / 2) taken.store(true);
    if (t == 1 && b == kN / 2) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!taken.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
  });
  ASSERT_TRUE(taken.load());
  // Thread 0 walked its own half front to back, then took from the back of thread 1's.
  std::vector<int64_t> own, from_other;
  for (const auto& [t, b] : calls) {
    if (t == 0) (b < kN / 2 ? own : from_other).push_back(b);
  }
  ASSERT_EQ(own.size(), static_cast<size_t>(kN / 2 / kChunk));
  for (size_t i = 0; i < own.size(); ++i) EXPECT_EQ(own[i], static_cast<int64_t>(i) * kChunk);
  ASSERT_FALSE(from_other.empty());
  EXPECT_EQ(from_other.front(), kN - kChunk);
  for (size_t i = 1; i < from_other.size(); ++i) EXPECT_LT(from_other[i], from_other[i - 1]);
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
