// Where a MoE layer's routed experts come from when they are not all in memory (the
// interface the MoE block, model/blocks/moe.h, reads through; engine/expert_store.h
// implements it as a cache of experts read from the model file), and its counters.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "cpu/matmul.h"

namespace moetier {

struct ExpertStoreStats {
  int64_t requests = 0;        // experts asked for by the MoE blocks (one per expert and batch)
  int64_t hits = 0;            // of them, in memory already (not by a read ahead)
  int64_t read_ahead_hits = 0; // of them, read (or being read) ahead because predicted
  int64_t misses = 0;          // read on demand
  int64_t predicted = 0;       // experts the prediction named for a layer's next batch
  int64_t predicted_used = 0;  // of them, used by that batch
  int64_t used_after_prediction = 0;  // experts the predicted batches used
  int64_t reads = 0;           // experts read from the file (on demand and ahead; not the load)
  uint64_t bytes_read = 0;
  double read_busy_seconds = 0;  // wall time with at least one read in flight
  double wait_seconds = 0;       // the forward pass waiting for experts
  // hit rate = (hits + read_ahead_hits) / requests; disk GB/s = bytes_read / read_busy_seconds.
  double hit_rate() const { return requests > 0 ? static_cast<double>(hits + read_ahead_hits) / static_cast<double>(requests) : 0; }
  double prediction_accuracy() const {
    return used_after_prediction > 0 ? static_cast<double>(predicted_used) / static_cast<double>(used_after_prediction) : 0;
  }
  double disk_gb_per_second() const { return read_busy_seconds > 0 ? static_cast<double>(bytes_read) / read_busy_seconds / 1e9 : 0; }
};
// Counters of `b` minus those of `a` (a measurement window), and sums of windows.
ExpertStoreStats operator-(const ExpertStoreStats& b, const ExpertStoreStats& a);
ExpertStoreStats& operator+=(ExpertStoreStats& a, const ExpertStoreStats& b);

// The first rows of one routed expert's gate, up and down matrices (each n_out rows of
// row_bytes, in the stacks' layout).
struct ExpertRows {
  const uint8_t* gate = nullptr;
  const uint8_t* up = nullptr;
  const uint8_t* down = nullptr;
};

// Where a layer's routed experts are read from when they are not all in memory
// (engine/expert_store.h: a cache of experts read from the model file on demand). The MoE
// block requests the experts a batch routes to, waits for each before computing it and
// releases them after; it never pins more than capacity() of a layer at once (a big batch
// goes in waves). Called from one thread (the one running the forward pass).
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  virtual bool serves(int layer) const = 0;
  // The layer's router, for predict_next of the layer before it.
  virtual void set_router(int layer, const cpu::WeightMatrix& router) = 0;
  // Experts of `layer` in memory at once (at least 3 · n_expert_used: engine/expert_tiers.h).
  virtual int capacity(int layer) const = 0;
  // Pins `experts` of `layer` until release(); reads of those not in memory are queued in
  // this order (behind any queued earlier).
  virtual void request(int layer, std::span<const int32_t> experts) = 0;
  // Whether a requested expert is in memory now.
  virtual bool ready(int layer, int32_t expert) const = 0;
  // Waits until a requested expert is in memory; its rows stay valid until release().
  virtual ExpertRows wait(int layer, int32_t expert) = 0;
  virtual void release(int layer, std::span<const int32_t> experts) = 0;
  // h: [n][n_embd], this layer's MoE input. Guesses the next layer's experts (its router
  // applied to h) and starts reading the missing ones, after the reads already queued.
  virtual void predict_next(int layer, const float* h, int64_t n, ThreadPool& pool) = 0;
  // Cumulative counters (thread-safe: a server's /metrics reads them while it decodes).
  virtual ExpertStoreStats stats() const = 0;
};

}  // namespace moetier
