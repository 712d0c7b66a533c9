// A persistent pool of worker threads, created once and passed explicitly to everything
// that computes (no global pool). The calling thread takes part as worker 0, so a pool of
// n threads starts n - 1 OS threads.
//
// Decoding one token issues hundreds of parallel regions of a few microseconds each, so
// hand-off must cost far less than a futex round trip: idle workers spin for a short while
// (kSpinNanoseconds) before sleeping on a condition variable, and the caller spins for the
// workers to finish. (Not std::atomic::wait: libstdc++ 12 without futexes, MinGW's, can
// lose its wake-ups, and a worker then sleeps through a job.) Never give a pool more threads than cores: spinning threads would then
// steal time from working ones.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moetier {

class ThreadPool {
 public:
  // n_threads >= 1 (callers resolve "default" to the physical core count first).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index) on every thread (0..size()-1) and returns when all are done.
  // Not reentrant: fn must not call run/parallel_for on the same pool.
  void run(const std::function<void(int thread_index)>& fn);

  // Splits [0, n) into contiguous chunks of at least `min_chunk` items, one per thread
  // where there is enough work, and calls fn(begin, end, thread_index) for each.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t, int)>& fn);

  // parallel_for for threads that may not run at the same speed (the E-cores of a hybrid
  // CPU, a core shared with another process, a slow vCPU). Each thread starts on the same
  // contiguous range parallel_for would give it and walks it front to back, `chunk` items
  // per call to fn (so each thread still streams its part of a matrix in order); a thread
  // whose range is done takes chunks from the back of the range with the most items left.
  // fn may be called several times per thread, with sub-ranges of at most `chunk` items;
  // every item of [0, n) is passed exactly once. n < 2^31.
  void parallel_for_balanced(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t, int)>& fn);

  // Inside run(): blocks until every thread of the pool has called barrier() (all size()
  // threads must call it the same number of times). Memory written before the barrier is
  // visible to every thread after it.
  void barrier();

  static constexpr int64_t kSpinNanoseconds = 200'000;

 private:
  void worker_loop(int index);
  uint64_t wait_for_generation(uint64_t seen);
  void wake_sleepers();
  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};  // bumped once per run(); workers wait for a change
  // A worker that spun for kSpinNanoseconds without a new generation counts itself in
  // sleepers_ (seq_cst), then checks generation_ again and sleeps on wake_ under sleep_mutex_;
  // run() bumps generation_ (seq_cst) and reads sleepers_: one of the two sees the other's
  // write, so a sleeping worker is always woken.
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> pending_{0};          // workers still inside the current job
  std::atomic<bool> stop_{false};
  // parallel_for_balanced: thread t's range left, front in the low 32 bits and back in the
  // high 32 (one word, so the owner's front and a taker's back never pass each other).
  struct alignas(64) BalancedRange {
    std::atomic<uint64_t> bounds{0};
  };
  std::vector<BalancedRange> ranges_;
  // Sense-reversing barrier state.
  std::atomic<int> barrier_count_{0};
  std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace moetier
