// The SiLU loops of cpu/silu.h, included by silu.cpp (base ISA) and silu_<tier>.cpp so all
// compile the very same arithmetic (no contraction in any of them).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/math.h"
#include "cpu/simd.h"

namespace moetier::cpu::silu_lanes {
// Internal linkage: each unit keeps its own copy, compiled for its own ISA.
namespace {

// cpu::silu()'s expression (cpu/ops.h), copied rather than called: that inline function would be
// emitted here as a weak symbol, which no ISA unit may define (docs/adding-a-kernel.md).
inline float silu_one(float x) { return x / (1.0f + math::exp_f32(-x)); }

// Whether every lane of a comparison mask (lanes 0 or −1) is set: one move-mask.
template <class VInt>
MOETIER_SIMD_INLINE bool all_lanes(VInt mask) {
#if defined(__AVX512F__)
  if constexpr (sizeof(VInt) == 64) {
    __m512i m;
    std::memcpy(&m, &mask, sizeof(m));
    return _mm512_test_epi32_mask(m, m) == 0xFFFF;
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(VInt) == 32) {
    __m256 m;
    std::memcpy(&m, &mask, sizeof(m));
    return _mm256_movemask_ps(m) == 0xFF;
  }
#endif
  if constexpr (sizeof(VInt) == 16) {
    __m128 m;
    std::memcpy(&m, &mask, sizeof(m));
    return _mm_movemask_ps(m) == 0xF;
  }
  int32_t all = -1;
  for (int i = 0; i < static_cast<int>(sizeof(VInt) / 4); ++i) all &= mask[i];
  return all == -1;
}

// One group of lanes (V: kF floats, VInt: as many int32): out = silu(gate) · up, or
// silu(gate) with kUp false. e^−x comes from simd::exp_f32_lanes, equal to math::exp_f32
// where −87 ≤ −x ≤ 88; a group with a lane outside (or NaN) goes element by element.
template <class V, class VInt, bool kUp>
MOETIER_SIMD_INLINE void group(const float* gate, const float* up, float* out) {
  constexpr int kLanes = sizeof(V) / 4;
  const V x = simd::load<V>(gate);
  const V e_arg = -x;
  if (!all_lanes<VInt>((e_arg >= -87.0f) & (e_arg <= 88.0f))) {
    float s[kLanes];
    for (int i = 0; i < kLanes; ++i) {
      s[i] = silu_one(gate[i]);
      if constexpr (kUp) s[i] = s[i] * up[i];
    }
    for (int i = 0; i < kLanes; ++i) out[i] = s[i];  // after every read: out may be gate or up
    return;
  }
  V s = x / (1.0f + simd::exp_f32_lanes<V, VInt>(e_arg));
  if constexpr (kUp) s = s * simd::load<V>(up);
  simd::store(out, s);
}

// Native vectors, then (with 16-lane vectors) one group of 8, then one element at a time:
// the MoE block calls this 8 elements (one tile of rows) at a time.
template <bool kUp>
inline void run(const float* gate, const float* up, int64_t n, float* out) {
  using V8 = float __attribute__((vector_size(32)));
  using VI8 = int32_t __attribute__((vector_size(32)));
  int64_t i = 0;
  for (; i + simd::kF <= n; i += simd::kF) group<simd::VF, simd::VI, kUp>(gate + i, kUp ? up + i : nullptr, out + i);
  if constexpr (simd::kF > 8) {
    if (i + 8 <= n) {
      group<V8, VI8, kUp>(gate + i, kUp ? up + i : nullptr, out + i);
      i += 8;
    }
  }
  for (; i < n; ++i) {
    if constexpr (kUp) {
      out[i] = silu_one(gate[i]) * up[i];
    } else {
      out[i] = silu_one(gate[i]);
    }
  }
}

inline void swiglu_impl(const float* gate, const float* up, int64_t n, float* out) { run<true>(gate, up, n, out); }
inline void silu_in_place_impl(float* x, int64_t n) { run<false>(x, nullptr, n, x); }

}  // namespace
}  // namespace moetier::cpu::silu_lanes
