// Dot products between one weight row and activation rows, the inner loop of every matmul.
// Weights stay in their GGUF block format; activations are first converted to the weight
// type's activation type (activation_type_for: ggml's "vec_dot_type", rounded as ggml's CPU
// backend does, which is what lets logits match llama.cpp's). Kernels are family (weight
// type) × ISA tier (cpu/isa.h), listed once in cpu/dot/kernel_list.h; the quantized ones are
// bit-identical to their family's scalar reference, the float ones within a derived bound
// (docs/numerics.md, "Dot products").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/cpu_features.h"
#include "cpu/dot/kernel_list.h"
#include "cpu/isa.h"
#include "tensor/dtype.h"

namespace moetier::cpu {

// n: elements in the row (a multiple of both types' block sizes). Returns Σ w[i] · a[i].
using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* activation_row);

// One weight row against n_act activation rows (1 ≤ n_act ≤ kMaxDotRows) that start
// activation_stride bytes apart: out[j] = Σ_i w[i] · a_j[i]. The weight blocks are loaded
// and unpacked once for all n_act rows (the point of tiling prompt matmuls over tokens);
// every out[j] must be bit-identical to the family's VecDotFn on row j, so results never
// depend on how tokens were tiled.
inline constexpr int kMaxDotRows = 4;
using MultiDotFn = void (*)(int64_t n, const void* weight_row, const void* activation_rows,
                            int64_t activation_stride, int n_act, float* out);

// Prompt matmuls (many tokens): kTileRows weight rows against n_act activation rows in one
// call, every (row, token) bit-identical to fn (docs/numerics.md, "Tile kernels"). Q8_0
// activations come with their blocks' terms (act_blocks, from q8_0_act_blocks once per
// activation row, shared by all row tiles); Q8_K activations carry theirs (bsums).
inline constexpr int kTileRows = 8;
struct Q8_0ActBlock {
  int32_t offset = 0;  // −128 · Σ_j q_a[j] over the block
  float d = 0;         // the block's scale, f16 → f32
};
struct TileDotArgs {
  int64_t n = 0;                            // elements per row (a multiple of 32)
  const void* weight_rows = nullptr;        // the first of n_rows weight rows
  int64_t weight_stride = 0;                // bytes between weight rows
  int n_rows = 0;                           // 1..kTileRows
  const void* activation_rows = nullptr;    // the first of n_act activation rows
  int64_t activation_stride = 0;            // bytes between activation rows
  int64_t n_act = 0;
  const Q8_0ActBlock* act_blocks = nullptr; // Q8_0 activations: [n_act][n / 32], row j at act_blocks + j·(n/32)
  float* out = nullptr;                     // out[j·out_stride + r] = row r · activation j
  int64_t out_stride = 0;
};
using TileDotFn = void (*)(const TileDotArgs& args);

struct DotKernel {
  DType weight_type;
  DType activation_type;
  VecDotFn fn;
  IsaTier tier = IsaTier::kScalar;  // the build the kernel belongs to
  MultiDotFn multi = nullptr;       // nullptr: callers loop over fn
  TileDotFn tile = nullptr;         // nullptr: callers use multi
  // The tile kernel on rows stored interleaved (cpu/interleave.h): weight_rows is one group
  // of kTileRows rows (n_rows = kTileRows; weight_stride unused), any n_act ≥ 1, bit-identical
  // to fn on the rows before interleaving. nullptr: this tier has no kernel for that layout,
  // so the loader keeps the file's layout.
  TileDotFn tile_x8 = nullptr;
};

// Calls k.multi when present, else k.fn per activation row.
inline void dot_rows(const DotKernel& k, int64_t n, const void* weight_row, const void* activation_rows,
                     int64_t activation_stride, int n_act, float* out) {
  if (k.multi) {
    k.multi(n, weight_row, activation_rows, activation_stride, n_act, out);
    return;
  }
  const auto* a = static_cast<const uint8_t*>(activation_rows);
  for (int j = 0; j < n_act; ++j) out[j] = k.fn(n, weight_row, a + j * activation_stride);
}

// The kernels a tier builds itself (cpu/dot/kernel_list.h; not its fallback's): function
// pointers, safe to read on any CPU, to call only where isa_tier_runs_on(tier, cpu).
std::span<const DotKernel> dot_kernels(IsaTier tier);
// The kernel that serves a weight type on a tier: the tier's own, else its fallback's
// (cpu/isa.h), else scalar; nullptr if moetier cannot compute with the weight type.
const DotKernel* dot_kernel(DType weight_type, IsaTier tier);
// The fastest kernel the CPU runs: dot_kernel(weight_type, isa_tier(cpu)).
const DotKernel* best_dot_kernel(DType weight_type, const CpuFeatures& cpu);
// The scalar reference kernel for a weight type (nullptr if unsupported).
const DotKernel* scalar_dot_kernel(DType weight_type);

// The activation type a weight type's dot product consumes; nullopt if moetier cannot
// compute with the weight type.
std::optional<DType> activation_type_for(DType weight_type);

namespace dot {
// A Q8_0 activation row's per-block terms for TileDotFn (n / 32 of them).
void q8_0_act_blocks(int64_t n, const void* activation_row, Q8_0ActBlock* out);

// Every kernel of cpu/dot/kernel_list.h, declared by its forms: <family>_<tier> (VecDotFn),
// then _multi (MultiDotFn), _tile and _tile_x8 (TileDotFn).
#define MOETIER_DOT_DECLARE_fn(name) float name(int64_t n, const void* w, const void* a);
#define MOETIER_DOT_DECLARE_multi(name) \
  MOETIER_DOT_DECLARE_fn(name)          \
  void name##_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
#define MOETIER_DOT_DECLARE_tile(name) MOETIER_DOT_DECLARE_multi(name) void name##_tile(const TileDotArgs& args);
#define MOETIER_DOT_DECLARE_tile_x8(name) MOETIER_DOT_DECLARE_tile(name) void name##_tile_x8(const TileDotArgs& args);
#define MOETIER_DOT_DECLARE(family, tier, forms) MOETIER_DOT_DECLARE_##forms(family##_##tier)
MOETIER_DOT_KERNELS(MOETIER_DOT_DECLARE)
#undef MOETIER_DOT_DECLARE
#undef MOETIER_DOT_DECLARE_tile_x8
#undef MOETIER_DOT_DECLARE_tile
#undef MOETIER_DOT_DECLARE_multi
#undef MOETIER_DOT_DECLARE_fn
}  // namespace dot

}  // namespace moetier::cpu
