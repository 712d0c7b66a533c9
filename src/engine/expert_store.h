// The routed experts of a model bigger than RAM: a cache of expert slots in memory, the rest
// read from the model file on demand (model/blocks/moe.h, ExpertSource).
//
// Each streamed layer has its own pool of `capacity` slots (its experts' sizes differ from
// other layers' in mixed-quant files); a slot holds one expert's gate, up and down rows,
// read with unbuffered positioned reads (platform::File::open_unbuffered: the page cache
// would otherwise keep a second copy of every byte read) by a few reader threads, many
// reads in flight, and interleaved on arrival into the tile kernels' layout where the CPU's
// kernels have it (cpu/interleave.h). Misses evict the policy's victim among the slots not
// pinned and not being read. After the layer's own misses, the next layer's experts as its
// router picks them from this layer's input are read ahead (predict_next): one layer of
// compute hides their reads.
//
// The slots are filled at load with the first experts of each layer, so a run starts with
// as much in RAM as fits. Counters (hits, misses, bytes and seconds of reading, prediction
// accuracy) are cumulative; stats() reads them at any time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "cpu/interleave.h"
#include "cpu/matmul.h"
#include "gguf/gguf.h"
#include "model/blocks/moe.h"
#include "platform/file.h"
#include "platform/memory.h"

namespace moetier {

enum class ExpertCachePolicy {
  kLru,  // evict the expert used longest ago
  kLfu,  // evict the expert with the lowest use count, decayed by half every kLfuHalfLife uses of its layer
};
// "lru" / "lfu"; anything else is kBadInput naming --expert-cache-policy.
Result<ExpertCachePolicy> parse_expert_cache_policy(std::string_view text);
std::string_view expert_cache_policy_name(ExpertCachePolicy policy);

// One streamed layer: its three expert stacks in the file and its slots.
struct ExpertStoreLayer {
  int layer = 0;
  const gguf::TensorInfo* gate = nullptr;  // {n_embd, n_ff, n_expert}
  const gguf::TensorInfo* up = nullptr;
  const gguf::TensorInfo* down = nullptr;  // {n_ff, n_embd, n_expert}
  int capacity = 0;                        // slots (experts in memory at once)
  // Repack on arrival into cpu/interleave.h's layout: gate and up (a pair), and down.
  bool interleave_gate_up = false;
  bool interleave_down = false;
};

struct ExpertStoreOptions {
  std::string path;                  // the model file
  uint64_t data_offset = 0;          // of its data section (TensorInfo::offset is relative to it)
  std::vector<ExpertStoreLayer> layers;
  int64_t n_expert_used = 0;
  ExpertCachePolicy policy = ExpertCachePolicy::kLru;
  int reader_threads = 4;            // reads in flight
  bool mlock = false;                // lock the slots in RAM (--mlock)
  bool progress = true;              // progress bar while filling the slots at load
};

class ExpertStore final : public ExpertSource {
 public:
  // Opens the file, allocates the slots and fills them. kRuntime on I/O or allocation failure.
  static Result<std::unique_ptr<ExpertStore>> create(const ExpertStoreOptions& options);
  ~ExpertStore() override;

  bool serves(int layer) const override {
    return layer >= 0 && layer < static_cast<int>(by_layer_.size()) && by_layer_[static_cast<size_t>(layer)] >= 0;
  }
  void set_router(int layer, const cpu::WeightMatrix& router) override;

  int capacity(int layer) const override;
  void request(int layer, std::span<const int32_t> experts) override;
  bool ready(int layer, int32_t expert) const override;
  ExpertRows wait(int layer, int32_t expert) override;
  void release(int layer, std::span<const int32_t> experts) override;
  void predict_next(int layer, const float* h, int64_t n, ThreadPool& pool) override;

  ExpertStoreStats stats() const override;
  // The first read error (ok while none): the experts it concerned hold zeros.
  Status status() const;
  uint64_t slot_bytes() const { return slot_bytes_total_; }  // memory of all slots
  int64_t experts_in_memory() const;                         // slots over all layers
  int64_t experts_total() const;
  double fill_seconds() const { return fill_seconds_; }
  ExpertCachePolicy policy() const { return options_.policy; }

 private:
  enum class SlotState : uint8_t { kEmpty, kReading, kReady };
  struct Slot {
    SlotState state = SlotState::kEmpty;
    int32_t expert = -1;
    int32_t pins = 0;
    uint64_t last_use = 0;   // the layer's use clock at the last use
    double frequency = 0;    // kLfu: decayed use count as of last_use
    bool read_ahead = false; // read because predicted, not used since
    ExpertRows rows;         // valid in kReady
  };
  // Where one matrix of an expert sits in the file and in a slot.
  struct Part {
    uint64_t offset = 0;      // of expert 0, from the data section start
    uint64_t bytes = 0;       // one expert's bytes
    uint64_t slot_offset = 0; // of this part's area within a slot
    DType type = DType::F32;
    int64_t n_in = 0, n_out = 0, row_bytes = 0;
  };
  struct Layer {
    ExpertStoreLayer spec;
    Part parts[3];                   // gate, up, down
    uint64_t slot_stride = 0;        // bytes per slot
    platform::AnonymousMemory memory;
    std::vector<Slot> slots;
    std::vector<int32_t> slot_of;    // [n_expert] -> slot, -1 when not in memory
    uint64_t clock = 0;              // uses so far
    std::vector<int32_t> predicted;  // experts read ahead for the next batch (sorted)
    cpu::WeightMatrix router;        // n_mat == 0 until set_router
  };
  struct ReadJob {
    int layer_index;
    int32_t slot;
    int32_t expert;
  };

  explicit ExpertStore(const ExpertStoreOptions& options) : options_(options) {}
  Layer& layer_of(int layer) { return layers_[static_cast<size_t>(by_layer_[static_cast<size_t>(layer)])]; }
  const Layer& layer_of(int layer) const { return layers_[static_cast<size_t>(by_layer_[static_cast<size_t>(layer)])]; }
  // A free slot or the policy's victim (not pinned, not being read); -1 when none. Lock held.
  int32_t victim(const Layer& l) const;
  double score(const Layer& l, const Slot& s) const;
  void touch(Layer& l, Slot& s);
  // Claims a slot for `expert` and queues its read; when every slot is busy, waits for one
  // (may_wait) or returns -1. Lock held.
  int32_t start_read(std::unique_lock<std::mutex>& lock, int layer_index, int32_t expert, bool pin, bool may_wait);
  void reader_main();
  Status read_expert(const Layer& l, int32_t slot, int32_t expert, std::vector<uint8_t>& staging) const;

  ExpertStoreOptions options_;
  std::optional<platform::File> file_;  // set by create()
  std::vector<Layer> layers_;
  std::vector<int> by_layer_;       // model layer -> index in layers_, -1 when not served
  uint64_t slot_bytes_total_ = 0;
  double fill_seconds_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable slot_changed_;  // a read finished or a slot was unpinned
  std::condition_variable job_ready_;
  std::deque<ReadJob> jobs_;
  bool stopping_ = false;
  int reads_in_flight_ = 0;
  std::chrono::steady_clock::time_point busy_since_;
  ExpertStoreStats stats_;
  Status error_;
  std::vector<std::thread> readers_;
  // predict_next's scratch (the forward thread's only): router logits, top-k candidates.
  std::vector<float> logits_;
  std::vector<std::pair<float, int32_t>> predict_picks_;
  std::vector<int32_t> predict_order_, predict_chosen_;
  cpu::QuantizedActivations router_input_;
};

}  // namespace moetier
