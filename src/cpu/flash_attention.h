// Flash attention on the CPU for one work item: the query heads of one or more consecutive
// GQA groups (each group: the heads that read one KV head) × a run of consecutive query
// rows of one sequence, against that sequence's KV cache. The keys are swept in tiles of
// kFlashKeyTile: each K/V tile is converted from the cache type (f32 / f16 / q8_0 / q4_0)
// into a small per-thread buffer and serves every query vector of the item, so the cache
// bytes are read once per item and tile instead of once per head, and the memory per
// thread is set by the tile sizes, never by the depth. An item over all KV heads reads whole
// contiguous cache rows once (one head's slice of a row is a strided read, which DRAM
// serves at about a third of the contiguous speed on one core).
//
// Each query vector's arithmetic (the 16-lane dot products, the integer scores of a Q8_0 K
// cache, the online softmax per part of kFlashPartKeys keys, the fold of the parts) is fixed
// whatever the item, the blocking, the thread count or the tier: split and unsplit runs and
// every tier's build are bit-identical. The arithmetic and its error bounds:
// docs/numerics.md, "Flash attention".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/isa.h"
#include "tensor/dtype.h"

namespace moetier::cpu {

inline constexpr int64_t kFlashKeyTile = 64;     // keys per K/V tile
inline constexpr int64_t kFlashPartKeys = 1024;  // keys per part (a multiple of the tile)
// Query vectors (rows × query heads) a prompt's item should hold: enough that a tile's
// conversion (and its read of the cache) is amortised over many dot products, few enough
// that the item's queries and accumulators (~3 KiB per vector at head_dim 256) stay in L2.
inline constexpr int64_t kFlashItemVectors = 128;

// head_dim values the kernels take: a multiple of 32 (Q8_0/Q4_0 blocks and the 16-lane
// vectors never straddle heads). attention_block falls back to the exact path otherwise.
inline bool flash_attention_supports(int64_t head_dim, DType type_k, DType type_v) {
  const auto ok = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::Q8_0 || t == DType::Q4_0; };
  return head_dim > 0 && head_dim % 32 == 0 && ok(type_k) && ok(type_v);
}

// The task's KV heads' rows in a cache (K or V): position p's row starts at
// data + p·row_bytes and the first head's head_dim elements start at element `first` of it
// (the task's n_kv_heads heads follow contiguously).
struct KvHeadRows {
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  int64_t first = 0;       // first kv_head · head_dim
  DType type = DType::F32; // F32, F16, Q8_0 or Q4_0
};

struct FlashAttentionTask {
  int64_t head_dim = 0;   // multiple of 32
  int64_t n_heads = 0;    // query heads per KV head (the GQA group, ≥ 1)
  int64_t n_kv_heads = 1; // consecutive KV heads; query head h of the task reads KV head h / n_heads
  int64_t n_rows = 0;     // query rows (≥ 1), consecutive tokens
  int64_t pos0 = 0;       // position of row 0: row r sees keys 0 .. pos0 + r
  // Query vector (row r, head h < n_kv_heads·n_heads) at q + r·q_row_stride + h·head_dim
  // (floats); likewise the gate (nullptr: no output gate) and the output.
  const float* q = nullptr;
  int64_t q_row_stride = 0;
  const float* gate = nullptr;
  int64_t gate_row_stride = 0;
  float* out = nullptr;
  int64_t out_row_stride = 0;
  KvHeadRows k, v;
  float scale = 1.0f;     // scores are (q·k)·scale
  int64_t n_vectors() const { return n_rows * n_kv_heads * n_heads; }
  int64_t n_keys() const { return pos0 + n_rows; }  // the last row's keys
  int64_t n_parts() const { return (n_keys() + kFlashPartKeys - 1) / kFlashPartKeys; }
};

// Per-thread working memory of an item (reused across items; it only grows). Its size is
// a function of head_dim, the item's KV heads and its vectors (flash_scratch_bytes), never
// of the keys.
struct FlashScratch {
  std::vector<float> f;
  std::vector<double> d;
  void reserve_for(int64_t head_dim, int64_t n_kv_heads, int64_t n_vectors);
  size_t bytes() const { return f.capacity() * sizeof(float) + d.capacity() * sizeof(double); }
};
size_t flash_scratch_bytes(int64_t head_dim, int64_t n_kv_heads, int64_t n_vectors);

// The state of one part for every query vector of a task: o [n_vectors][head_dim]
// (unnormalised), m [n_vectors] (the running max), l [n_vectors] (Σ p, 0: the row does not
// reach this part), in the kernels' own order of the vectors (opaque to callers, who only
// pass the slots back to combine).
struct FlashPartial {
  float* o = nullptr;
  float* m = nullptr;
  double* l = nullptr;
};

struct FlashKernels {
  // The whole task: every part, folded, normalised, gated, written to task.out.
  void (*attend)(const FlashAttentionTask& task, FlashScratch& scratch);
  // Part `part` (0 ≤ part < task.n_parts()) into `out`.
  void (*attend_part)(const FlashAttentionTask& task, int64_t part, FlashScratch& scratch, const FlashPartial& out);
  // Folds parts[0 .. n_parts) in order and writes task.out (what attend writes).
  void (*combine)(const FlashAttentionTask& task, const FlashPartial* parts, int64_t n_parts, FlashScratch& scratch);
  IsaTier tier;  // the build
};

// The build that serves a tier (cpu/isa.h): one source (flash_attention_impl.h) compiled for
// the base ISA (the scalar reference, flash_attention.cpp) and in flash_attention_<tier>.cpp.
// Only call a tier's kernels where isa_tier_runs_on(tier, cpu).
const FlashKernels& flash_kernels(IsaTier tier);
// The build the CPU runs best: flash_kernels(isa_tier(cpu)).
const FlashKernels& flash_kernels(const CpuFeatures& cpu);

namespace flash {
// The builds, one per unit (flash_kernels picks among them).
extern const FlashKernels kScalarBuild;
extern const FlashKernels kAvx2Build;
extern const FlashKernels kAvxVnniBuild;
extern const FlashKernels kAvx512Build;
}  // namespace flash

}  // namespace moetier::cpu
