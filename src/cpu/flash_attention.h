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
// Arithmetic of one query vector (head h of the row at position pos, which sees keys
// 0..pos), fixed whatever the item, the blocking, the thread count or the ISA:
//   * keys are cut into parts of kFlashPartKeys from key 0, each part into tiles of
//     kFlashKeyTile from the part's start;
//   * score s_j = fl(Σ_i q_i·k_ji) · scale, the dot product in 16 float lanes (lane l sums
//     i ≡ l mod 16 in order with fused multiply-adds), then a fixed halving tree: the error
//     is ≤ (head_dim/16 + 4)·u·Σ_i|q_i·k_ji| (u = 2^-24), the float-level accuracy of
//     llama.cpp's own f32/f16 dot products. (The exact path, -fa off, sums in double
//     lanes and is correctly rounded. A score a few ulp apart can flip a downstream 8-bit
//     activation code on a quantized model; this path is held to the same per-case
//     reference bounds as the exact one, tests/e2e/reference_logits_test.cpp, and meets
//     them: the largest prompt diff is 0.94 of its case's bound);
//   * with a Q8_0 K cache (-ctk q8_0) the score is an integer dot product instead, as in
//     llama.cpp's CPU flash attention: the query vector is quantized once per item to Q8_0
//     blocks (codes c_i, |c_i| ≤ 127, scale d_q,b stored as f16; quantize_row_q8_0_activations,
//     ggml's x86 rounding), and s_j = fl(acc·scale) with acc ← fma(float(isum_b),
//     fl(d_k,b·d_q,b), acc) over the blocks b in order from acc = 0, isum_b = Σ k_i·c_i
//     exact in int32 (|isum_b| ≤ 32·128·127 < 2^24, so float(isum_b) is exact too). The
//     float steps are element-wise over keys: every ISA gives the same bits. Error against
//     the float query q: with q̂_i = c_i·d_q,b and d_b = max|q_i in b|/127,
//       |q_i − q̂_i| ≤ δ_b = d_b·(1/2 + 254u) + 127·((2^-11 + 2u)·d_b + 2^-25)
//     (rounding to the nearest code: half a step, the float product x·(127/max) ≤ 2·127u
//     of a step; the f16 scale: 2^-11 relative, or 2^-25 absolute when subnormal), so
//       |ŝ_j − s_j| ≤ scale·Σ_i |k_ji|·δ_b(i) + (hd/32 + 3)·u·scale·Σ_i |q̂_i·k_ji|
//     (the second term: γ_(hd/32 + 2) of the block sum and the scale). The first term is the
//     quantization of q (≤ 0.56·d_b per element with the f16 scale's rounding): for
//     Gaussian-like q it is ≤ ~1e-2 of scale·‖q‖·‖k‖ (Cauchy–Schwarz) and ~4e-4 of it as a
//     random walk at head_dim 256, against ~1e-7 for the float scores; llama.cpp's -ctk q8_0
//     pays the same. tests/unit/flash_attention_test.cpp holds the kernel to the rounding
//     term against the attention of q̂ and checks this bound per score;
//   * per part, online softmax over its tiles: m ← max(m, max_j s_j), α = e^(m_old − m),
//     p_j = e^(s_j − m) (float, a polynomial exp within 2 ulp of expf),
//     l ← l·α + Σ_j p_j (double), o ← fma(o, α, Σ_j p_j·v_j) (float, the tile's sum in key
//     order with fused multiply-adds);
//   * parts are folded in order: M = max(M, m), a = e^(M_old − M), b = e^(m − M),
//     o_total ← o_total·a + o·b, L ← L·a + l·b;
//   * out = o_total · float(1 / L), then · sigmoid(gate) with an output gate.
// A part is the unit a deep decode is split over threads by (few items, many keys): its
// state (m, l, o) goes to a FlashPartials slot and flash_attention_combine folds the slots
// in the same order, so split and unsplit runs are bit-identical.
//
// Variants: the same source (flash_attention_impl.h, GCC vector extensions, explicit fused
// multiply-adds only) is compiled for the base ISA (the scalar reference), for AVX2 + FMA + F16C
// (flash_attention_avx2.cpp), the same plus AVX-VNNI (flash_attention_avxvnni.cpp: VPDPBUSD
// for the Q8_0 scores) and for AVX-512 (flash_attention_avx512.cpp); all four give
// bit-identical results and flash_kernels() picks the widest the CPU has.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
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
  std::string_view isa;  // "scalar", "avx2", "avxvnni", "avx512"
};

const FlashKernels& flash_kernels_scalar();
const FlashKernels& flash_kernels_avx2();    // only when cpu.has_avx2_set()
const FlashKernels& flash_kernels_avxvnni(); // only when cpu.has_avx2_set() && cpu.avxvnni
const FlashKernels& flash_kernels_avx512();  // only when cpu.has_avx512_set()
// The widest variant the CPU runs.
const FlashKernels& flash_kernels(const CpuFeatures& cpu);

}  // namespace moetier::cpu
