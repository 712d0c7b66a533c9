#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MOETIER_CPU_RELAX() _mm_pause()
#else
#define MOETIER_CPU_RELAX() std::this_thread::yield()
#endif

namespace moetier {

namespace {

// Spins until pred() holds; after kSpinNanoseconds yields the core on every check, so a
// long wait does not starve other processes.
template <class Pred>
void spin_until(Pred pred) {
  for (int i = 0; i < 256; ++i) {
    if (pred()) return;
    MOETIER_CPU_RELAX();
  }
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  for (int i = 0;; ++i) {
    if (pred()) return;
    if (yielding) {
      std::this_thread::yield();
    } else {
      MOETIER_CPU_RELAX();
      if ((i & 63) == 0 && std::chrono::steady_clock::now() - start >
                               std::chrono::nanoseconds(ThreadPool::kSpinNanoseconds)) {
        yielding = true;
      }
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)), ranges_(static_cast<size_t>(n_threads_)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

uint64_t ThreadPool::wait_for_generation(uint64_t seen) {
  // Spin briefly for the next job (decode issues them back to back), then sleep.
  const auto start = std::chrono::steady_clock::now();
  uint64_t gen = generation_.load(std::memory_order_acquire);
  for (int i = 0; gen == seen; ++i) {
    MOETIER_CPU_RELAX();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(kSpinNanoseconds)) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    gen = generation_.load(std::memory_order_acquire);
  }
  return gen;
}

void ThreadPool::wake_sleepers() {
  // After the seq_cst bump of generation_: a worker not counted here has yet to check
  // generation_ and will see the bump. One counted holds sleep_mutex_ from its check until
  // it sleeps, so taking the mutex first means the notification finds it asleep.
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
  }
  wake_.notify_all();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_generation(seen);
    if (stop_.load()) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  CHECK(pending_.load() == 0);
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake_sleepers();
  fn(0);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
}

void ThreadPool::barrier() {
  if (n_threads_ == 1) return;
  const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_phase_.fetch_add(1, std::memory_order_release);
    return;
  }
  spin_until([&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int parts = static_cast<int>(std::min<int64_t>(n_threads_, max_parts));
  if (parts == 1) {
    fn(0, n, 0);
    return;
  }
  run([&](int t) {
    if (t >= parts) return;
    const int64_t begin = n * t / parts;
    const int64_t end = n * (t + 1) / parts;
    if (begin < end) fn(begin, end, t);
  });
}

namespace {

constexpr uint64_t pack_range(uint64_t front, uint64_t back) { return front | (back << 32); }
constexpr uint64_t range_front(uint64_t bounds) { return bounds & 0xffff'ffffu; }
constexpr uint64_t range_back(uint64_t bounds) { return bounds >> 32; }

// Takes up to `chunk` items from the front (from_back false: the owner) or the back (another
// thread) of a range; false when it is empty.
bool take_chunk(std::atomic<uint64_t>& bounds, uint64_t chunk, bool from_back, int64_t& begin, int64_t& end) {
  uint64_t cur = bounds.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t front = range_front(cur), back = range_back(cur);
    if (front >= back) return false;
    const uint64_t n = std::min(chunk, back - front);
    const uint64_t next = from_back ? pack_range(front, back - n) : pack_range(front + n, back);
    if (bounds.compare_exchange_weak(cur, next, std::memory_order_relaxed)) {
      begin = static_cast<int64_t>(from_back ? back - n : front);
      end = begin + static_cast<int64_t>(n);
      return true;
    }
  }
}

}  // namespace

void ThreadPool::parallel_for_balanced(int64_t n, int64_t chunk,
                                       const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  CHECK(n < (int64_t{1} << 31));
  chunk = std::max<int64_t>(1, chunk);
  const int parts = static_cast<int>(std::min<int64_t>(n_threads_, (n + chunk - 1) / chunk));
  if (parts == 1) {
    for (int64_t b = 0; b < n; b += chunk) fn(b, std::min(n, b + chunk), 0);
    return;
  }
  for (int t = 0; t < parts; ++t) {
    ranges_[static_cast<size_t>(t)].bounds.store(pack_range(static_cast<uint64_t>(n * t / parts),
                                                            static_cast<uint64_t>(n * (t + 1) / parts)),
                                                 std::memory_order_relaxed);
  }
  // run() publishes the ranges (its generation bump is a release) and waits for every
  // thread, so fn's writes are visible to the caller afterwards; the splits themselves
  // need only the atomicity of each range word.
  run([&](int t) {
    if (t >= parts) return;
    int64_t begin = 0, end = 0;
    while (take_chunk(ranges_[static_cast<size_t>(t)].bounds, static_cast<uint64_t>(chunk), false, begin, end)) {
      fn(begin, end, t);
    }
    for (;;) {
      int victim = -1;
      uint64_t most = 0;
      for (int v = 0; v < parts; ++v) {
        const uint64_t b = ranges_[static_cast<size_t>(v)].bounds.load(std::memory_order_relaxed);
        const uint64_t left = range_back(b) > range_front(b) ? range_back(b) - range_front(b) : 0;
        if (left > most) {
          most = left;
          victim = v;
        }
      }
      if (victim < 0) return;
      if (take_chunk(ranges_[static_cast<size_t>(victim)].bounds, static_cast<uint64_t>(chunk), true, begin, end)) {
        fn(begin, end, t);
      }
    }
  });
}

}  // namespace moetier
