// Dot products between one weight row and one activation row, the inner loop of every
// matmul. Weights stay in their GGUF block format; activations are first converted to
// the weight type's activation type (ggml's "vec_dot_type"): Q8_K for the K-quants and
// IQ4_XS, Q8_0 for Q8_0 and Q4_0, F16 / BF16 for F16 / BF16, F32 for F32. Converting the
// activations the way ggml's CPU backend does is what lets moetier match llama.cpp's
// logits to float precision (see ../shared/ref/README.md, "refaq").
//
// Kernels are organised as family (weight type) × ISA, one translation unit each under
// cpu/dot/, each ISA variant tested against the scalar reference of its family.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/cpu_features.h"
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
// call. The kernel interleaves the rows' codes 4 bytes per row into a per-call buffer, so
// one integer-dot instruction adds 4 products to each of kTileRows rows' block sums against
// one broadcast 4-byte activation word: no horizontal adds and no per-pair sign fix-up,
// ~2.5x fewer instructions per product than `multi`. Each (row, token) is then scaled and
// accumulated exactly as the scalar reference does, so out is bit-identical to fn.
//
// K-quant and IQ4_XS weights against Q8_K activations: the activations carry their block
// sums, which is all the codes' offsets need (cpu/dot/kquant_tile_impl.h). For Q8_0 activations: VPDPBUSD needs one unsigned operand, so the weights are stored as
// w + 128 (u8) and each block's sum is started at −128·Σ q_a, which the caller computes
// once per activation row (q8_0_act_blocks) and shares between all row tiles.
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
  std::string_view isa;      // "scalar", "avx2", "avx512vnni", ...
  MultiDotFn multi = nullptr;  // nullptr: callers loop over fn
  TileDotFn tile = nullptr;    // nullptr: callers use multi
  // The tile kernel on rows stored interleaved (cpu/interleave.h): weight_rows is one group
  // of kTileRows rows (n_rows = kTileRows; weight_stride unused), any n_act ≥ 1, bit-identical
  // to fn on the rows before interleaving. nullptr: this ISA has no kernel for that layout,
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

// ISA kernel tables (cpu/dot/<isa>_table.cpp, compiled without ISA flags so they are safe
// to read on any CPU); best_dot_kernel picks from them after checking the CPU features.
std::span<const DotKernel> avx2_dot_kernels();    // needs avx2 && fma && f16c
std::span<const DotKernel> avxvnni_dot_kernels(); // needs the avx2 set && avxvnni (integer kernels; floats are AVX2's)
std::span<const DotKernel> avx512_dot_kernels();  // needs avx512f/bw/vl/vnni (+ avx2 set)

// The activation type a weight type's dot product consumes; nullopt if moetier cannot
// compute with the weight type.
std::optional<DType> activation_type_for(DType weight_type);

// The scalar reference kernel for a weight type (nullptr if unsupported).
const DotKernel* scalar_dot_kernel(DType weight_type);
// The fastest kernel the CPU supports for a weight type (falls back to scalar).
const DotKernel* best_dot_kernel(DType weight_type, const CpuFeatures& cpu);

namespace dot {
// A Q8_0 activation row's per-block terms for TileDotFn (n / 32 of them).
void q8_0_act_blocks(int64_t n, const void* activation_row, Q8_0ActBlock* out);
// The tile kernels: Q8_0 weights (cpu/dot/q8_0_tile_<isa>.cpp), Q4_K, Q5_K, Q6_K and
// IQ4_XS weights (cpu/dot/kquant_tile_<isa>.cpp; Q8_K activations need no act_blocks). Plain
// AVX2 (no VNNI) emulates VPDPBUSD: kquant_tile_avx2.cpp, q8_0_tile_avx2.cpp, iq4_xs_tile_avx2.cpp.
void q8_0_q8_0_avx2_tile(const TileDotArgs& args);
void q8_0_q8_0_avxvnni_tile(const TileDotArgs& args);
void q8_0_q8_0_avx512_tile(const TileDotArgs& args);
void q4_k_q8_k_avx2_tile(const TileDotArgs& args);
void q4_k_q8_k_avxvnni_tile(const TileDotArgs& args);
void q4_k_q8_k_avx512_tile(const TileDotArgs& args);
void q5_k_q8_k_avx2_tile(const TileDotArgs& args);
void q5_k_q8_k_avxvnni_tile(const TileDotArgs& args);
void q5_k_q8_k_avx512_tile(const TileDotArgs& args);
void q6_k_q8_k_avx2_tile(const TileDotArgs& args);
void q6_k_q8_k_avxvnni_tile(const TileDotArgs& args);
void q6_k_q8_k_avx512_tile(const TileDotArgs& args);
void iq4_xs_q8_k_avx2_tile(const TileDotArgs& args);
void iq4_xs_q8_k_avxvnni_tile(const TileDotArgs& args);
void iq4_xs_q8_k_avx512_tile(const TileDotArgs& args);
// The same on interleaved groups (DotKernel::tile_x8).
void q4_k_q8_k_avx2_tile_x8(const TileDotArgs& args);
void q4_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args);
void q4_k_q8_k_avx512_tile_x8(const TileDotArgs& args);
void q5_k_q8_k_avx2_tile_x8(const TileDotArgs& args);
void q5_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args);
void q5_k_q8_k_avx512_tile_x8(const TileDotArgs& args);
void q6_k_q8_k_avx2_tile_x8(const TileDotArgs& args);
void q6_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args);
void q6_k_q8_k_avx512_tile_x8(const TileDotArgs& args);
void iq4_xs_q8_k_avx2_tile_x8(const TileDotArgs& args);
void iq4_xs_q8_k_avxvnni_tile_x8(const TileDotArgs& args);
void iq4_xs_q8_k_avx512_tile_x8(const TileDotArgs& args);
// Scalar references, one per family (cpu/dot/<family>_scalar.cpp).
float f32_f32_scalar(int64_t n, const void* w, const void* a);
float f16_f16_scalar(int64_t n, const void* w, const void* a);
float bf16_bf16_scalar(int64_t n, const void* w, const void* a);
float q4_0_q8_0_scalar(int64_t n, const void* w, const void* a);
float q8_0_q8_0_scalar(int64_t n, const void* w, const void* a);
float q4_k_q8_k_scalar(int64_t n, const void* w, const void* a);
float q5_k_q8_k_scalar(int64_t n, const void* w, const void* a);
float q6_k_q8_k_scalar(int64_t n, const void* w, const void* a);
float iq4_xs_q8_k_scalar(int64_t n, const void* w, const void* a);
// AVX2 + FMA + F16C variants (cpu/dot/<family>_avx2.cpp); only call when
// cpu.avx2 && cpu.fma && cpu.f16c. The _multi ones are the families' MultiDotFn.
float q4_k_q8_k_avx2(int64_t n, const void* w, const void* a);
float q6_k_q8_k_avx2(int64_t n, const void* w, const void* a);
float q8_0_q8_0_avx2(int64_t n, const void* w, const void* a);
float q5_k_q8_k_avx2(int64_t n, const void* w, const void* a);
float iq4_xs_q8_k_avx2(int64_t n, const void* w, const void* a);
float q4_0_q8_0_avx2(int64_t n, const void* w, const void* a);
float f32_f32_avx2(int64_t n, const void* w, const void* a);
float f16_f16_avx2(int64_t n, const void* w, const void* a);
float bf16_bf16_avx2(int64_t n, const void* w, const void* a);
void q4_k_q8_k_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q5_k_q8_k_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q6_k_q8_k_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void iq4_xs_q8_k_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q8_0_q8_0_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q4_0_q8_0_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void f32_f32_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void f16_f16_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void bf16_bf16_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
// AVX2 + AVX-VNNI variants of the integer kernels (cpu/dot/<family>_avxvnni.cpp: the AVX2
// units compiled with -mavxvnni); only call when best_dot_kernel would pick that table.
float q4_k_q8_k_avxvnni(int64_t n, const void* w, const void* a);
float q5_k_q8_k_avxvnni(int64_t n, const void* w, const void* a);
float q6_k_q8_k_avxvnni(int64_t n, const void* w, const void* a);
float iq4_xs_q8_k_avxvnni(int64_t n, const void* w, const void* a);
float q8_0_q8_0_avxvnni(int64_t n, const void* w, const void* a);
float q4_0_q8_0_avxvnni(int64_t n, const void* w, const void* a);
void q4_k_q8_k_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q5_k_q8_k_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q6_k_q8_k_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void iq4_xs_q8_k_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q8_0_q8_0_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q4_0_q8_0_avxvnni_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
// AVX-512 F/BW/VL/VNNI variants (cpu/dot/<family>_avx512.cpp, table in avx512_table.cpp);
// only call when best_dot_kernel would pick the AVX-512 table. *_multi are MultiDotFn.
float f32_f32_avx512(int64_t n, const void* w, const void* a);
float f16_f16_avx512(int64_t n, const void* w, const void* a);
float bf16_bf16_avx512(int64_t n, const void* w, const void* a);
float q4_0_q8_0_avx512(int64_t n, const void* w, const void* a);
float q8_0_q8_0_avx512(int64_t n, const void* w, const void* a);
float q4_k_q8_k_avx512(int64_t n, const void* w, const void* a);
float q5_k_q8_k_avx512(int64_t n, const void* w, const void* a);
float q6_k_q8_k_avx512(int64_t n, const void* w, const void* a);
float iq4_xs_q8_k_avx512(int64_t n, const void* w, const void* a);
void f32_f32_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void f16_f16_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void bf16_bf16_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q4_0_q8_0_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q8_0_q8_0_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q4_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q5_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void q6_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
void iq4_xs_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out);
}  // namespace dot

}  // namespace moetier::cpu
