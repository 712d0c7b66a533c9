// A one-line progress bar on stderr for long work (loading, hashing, synthesizing).
// Draws only when stderr is a terminal (or when forced), at most ~10 times a second,
// so redirected logs stay clean. Not thread-safe: one owner updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace moetier {

struct ProgressOptions {
  std::string label;          // shown before the bar, e.g. "loading"
  uint64_t total = 0;         // units of work (bytes when `bytes` is true)
  bool bytes = true;          // format amounts as MiB/GiB and show GB/s
  bool enabled = true;        // false: draw nothing (e.g. --quiet, or tests)
};

class ProgressBar {
 public:
  explicit ProgressBar(ProgressOptions options);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void add(uint64_t done_delta) { update(done_ + done_delta); }
  void update(uint64_t done);
  // Final line (always printed when enabled, even if not a terminal); idempotent.
  void finish();
  double elapsed_seconds() const;
  // Achieved rate in GB/s (1e9 bytes per second) so far.
  double gb_per_second() const;

 private:
  void draw(bool final_line);
  ProgressOptions options_;
  uint64_t done_ = 0;
  bool is_tty_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace moetier
