// A persistent pool of worker threads, created once and passed explicitly to everything
// that computes (no global pool). The calling thread takes part as worker 0, so a pool of
// n threads starts n - 1 OS threads.
#pragma once

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
  void run(const std::function<void(int thread_index)>& fn);

  // Splits [0, n) into contiguous chunks of at least `min_chunk` items, one per thread
  // where there is enough work, and calls fn(begin, end, thread_index) for each.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_loop(int index);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace moetier
