// The native vectors of the including unit's ISA, for kernel code written once with GCC
// vector extensions and compiled per tier (flash_attention_impl.h, delta_rule_impl.h): the
// width is 64 bytes with AVX-512, 32 with AVX, 16 (SSE2) in the base build. Internal
// linkage: every unit keeps its own copy, compiled for its own ISA (no weak symbols in ISA
// units, docs/adding-a-kernel.md).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/math.h"

// 64-byte vectors only live inside inlined code (no ABI crossing); GCC reports -Wpsabi at the
// end of the unit, so the warning stays off for the including unit (only the kernel units).
#pragma GCC diagnostic ignored "-Wpsabi"

#define MOETIER_SIMD_INLINE inline __attribute__((always_inline))

namespace moetier::cpu::simd {
namespace {

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif
using VF = float __attribute__((vector_size(kVecBytes)));
using VI = int32_t __attribute__((vector_size(kVecBytes)));
constexpr int kF = kVecBytes / 4;  // float (and int32) lanes per native vector

// Unaligned loads and stores of a native vector (or any vector type V).
template <class V, class T>
MOETIER_SIMD_INLINE V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <class V, class T>
MOETIER_SIMD_INLINE void store(T* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}

// e^x lane by lane with math::exp_f32's arithmetic (n = floor(x·log2e + ½), r = x − n·ln2 in
// two parts, its polynomial for e^r, y·2^n from the exponent bits), for any float vector V
// and int32 vector VInt of as many lanes. A lane equals exp_f32(x) where −87 ≤ x ≤ 88: there
// 2^n is a normal float and exp_f32 takes the same single rounding y·2^n; lanes outside are
// the caller's to handle. The unit must compile without contraction (a fused multiply-add
// rounds differently).
template <class V, class VInt>
MOETIER_SIMD_INLINE V exp_f32_lanes(V x) {
  const V fx = x * math::kExpF32Log2e + 0.5f;
  V n = __builtin_convertvector(__builtin_convertvector(fx, VInt), V);  // trunc
  n = n > fx ? n - 1.0f : n;                                             // floor
  V r = x - n * math::kExpF32Ln2Hi;
  r = r - n * math::kExpF32Ln2Lo;
  const V r2 = r * r;
  V y = V{} + math::kExpF32Poly[0];
#pragma GCC unroll 8
  for (int i = 1; i < 6; ++i) y = y * r + math::kExpF32Poly[i];
  y = y * r2 + r + 1.0f;
  const VInt bits = (__builtin_convertvector(n, VInt) + 127) << 23;
  V pow2;
  std::memcpy(&pow2, &bits, sizeof(pow2));
  return y * pow2;
}

}  // namespace
}  // namespace moetier::cpu::simd
