// Wall-time split of the forward pass by block type, for `bench --profile` and
// `run --profile`. A Profiler is passed explicitly (Model::set_profiler); a null profiler
// costs one branch per block. Times are wall-clock nanoseconds of the calling thread
// around each block (the block's worker threads run inside that span).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace moetier {

enum class ProfileBlock : int {
  kEmbedding,
  kNorm,          // RMSNorms and residual adds between blocks
  kAttention,     // gated softmax attention incl. its projections
  kDeltaNet,      // Gated DeltaNet incl. its projections
  kDeltaRule,     // within kDeltaNet: the per-token part (conv, the recurrence, gated norm)
  kMoeRouter,     // router matmul, softmax, top-k
  kMoeExperts,    // routed and shared experts, one fused parallel region (moe.h)
  kMoeExpertWait, // within kMoeExperts: waiting for experts read from the model file
  kLmHead,        // output norm + output matmul
  kCount,
};

std::string_view profile_block_name(ProfileBlock block);
class Profiler;
// A table of the blocks with time: name, ms, share of the total, calls.
std::string format_profile(const Profiler& profiler);

class Profiler {
 public:
  struct Entry {
    int64_t ns = 0;
    int64_t calls = 0;
  };
  void add(ProfileBlock block, int64_t ns) {
    auto& e = entries_[static_cast<size_t>(block)];
    e.ns += ns;
    e.calls += 1;
  }
  // Time spent in `block` inside a scope of `parent`: counted for block, taken from parent
  // (so the total counts it once).
  void add_within(ProfileBlock block, ProfileBlock parent, int64_t ns) {
    add(block, ns);
    entries_[static_cast<size_t>(parent)].ns -= ns;
  }
  const Entry& entry(ProfileBlock block) const { return entries_[static_cast<size_t>(block)]; }
  int64_t total_ns() const {
    int64_t t = 0;
    for (const auto& e : entries_) t += e.ns;
    return t;
  }
  // The MoE blocks' routed work on the CPU: per call, the distinct experts read and the
  // (token, expert) pairs computed (a step's expert union).
  struct MoeCounts {
    int64_t calls = 0, experts = 0, pairs = 0;
  };
  void add_moe(int64_t experts, int64_t pairs) {
    ++moe_.calls;
    moe_.experts += experts;
    moe_.pairs += pairs;
  }
  const MoeCounts& moe() const { return moe_; }
  void reset() {
    entries_ = {};
    moe_ = {};
  }

 private:
  std::array<Entry, static_cast<size_t>(ProfileBlock::kCount)> entries_{};
  MoeCounts moe_;
};

// Adds the time from construction to destruction to `profiler` (if not null); with a
// `parent` (a block whose scope encloses this one), takes it from the parent's time.
class ScopedProfile {
 public:
  ScopedProfile(Profiler* profiler, ProfileBlock block, ProfileBlock parent = ProfileBlock::kCount)
      : profiler_(profiler), block_(block), parent_(parent) {
    if (profiler_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedProfile() {
    if (profiler_) {
      const int64_t ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
      if (parent_ == ProfileBlock::kCount) {
        profiler_->add(block_, ns);
      } else {
        profiler_->add_within(block_, parent_, ns);
      }
    }
  }
  ScopedProfile(const ScopedProfile&) = delete;
  ScopedProfile& operator=(const ScopedProfile&) = delete;

 private:
  Profiler* profiler_;
  ProfileBlock block_;
  ProfileBlock parent_;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace moetier
