// Small AVX2 helpers shared by the cpu/dot/*_avx2.cpp kernels (only included by files
// compiled with -mavx2 -mfma -mf16c), including the one emulation of the VNNI dot steps
// (dpbusd, dpbusd_signed, madd_acc) that the plain-AVX2 row and tile kernels use. Everything
// here has internal linkage (an anonymous namespace): an inline function with external
// linkage compiled into several ISA units could be the one copy the linker keeps for all
// (adding-a-kernel.md, "No weak symbols in ISA units").
//
// The same kernels are compiled a second time with -mavxvnni (cpu/dot/*_avxvnni.cpp include
// the *_avx2.cpp units): then __AVXVNNI__ is defined, the helpers below use AVX-VNNI's
// VPDPWSSD / VPDPBUSD (int16 pairs and u8×s8 quads multiplied and accumulated in one
// instruction) instead of VPMADDWD + VPADDD / VPMADDUBSW + VPMADDWD, and everything lives in
// namespace `avxvnni` with kernels named *_avxvnni — so the two builds never share a symbol.
// The integer results are the same (no intermediate saturates in either), so both stay
// bit-identical to the scalar references.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/status.h"
#include "cpu/dot.h"
#include "tensor/blocks.h"

#if defined(__AVXVNNI__)
#define MOETIER_DOT_NS avxvnni
#define MOETIER_DOT_KERNEL(name) name##_avxvnni
#define MOETIER_DOT_KERNEL_MULTI(name) name##_avxvnni_multi
#else
#define MOETIER_DOT_NS avx2
#define MOETIER_DOT_KERNEL(name) name##_avx2
#define MOETIER_DOT_KERNEL_MULTI(name) name##_avx2_multi
#endif

// The float scaling must not be contracted into FMAs (the units are built with -mfma), so
// that the result stays bit-identical to the scalar reference, which the end-to-end logit
// tests against llama.cpp were validated with: every ISA tier unit compiles with
// -ffp-contract=off (CMakeLists.txt).

namespace moetier::cpu::dot::MOETIER_DOT_NS {

namespace {

// v, unchanged, through an empty asm the optimizer cannot see into: the end of a chain of
// integer adds passed through it stays where it is. GCC otherwise reassociates such a chain
// into a tree, computes every step's products first and spills them to the stack (the 4-row
// Q4_K kernel ran at 58 GMAC/s so, 74 with it; the Q8_0 tile 10% slower).
inline __m256i keep_in_order(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

// acc + Σ of int16 pairs a·b per int32 lane (VPMADDWD then VPADDD, kept in order; one
// VPDPWSSD with VNNI). Exact: VPMADDWD's one overflow needs −32768 in both operands of both
// pairs.
inline __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
  return keep_in_order(_mm256_add_epi32(acc, _mm256_madd_epi16(a, b)));
#endif
}

// acc + q in int16 lanes, kept in order: the plain-AVX2 tile kernels' int16 step sums
// (kI16Pairs, kquant_tile_driver.h), whose callers bound the sums within int16.
inline __m256i add_i16_in_order(__m256i acc, __m256i q) { return keep_in_order(_mm256_add_epi16(acc, q)); }

// int16 lane k = u_2k·s_2k + u_2k+1·s_2k+1, u unsigned and s signed bytes (VPMADDUBSW,
// which saturates: exact while every |u0·s0 + u1·s1| ≤ 32767; callers state their bounds).
inline __m256i pairs_u8s8(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }

// The same for two signed operands, |c| ≤ 128 and |s| ≤ 127: |c| (VPABSB gives 128 for
// −128, as an unsigned byte) against s carrying c's sign (VPSIGNB; 0 where c is 0).
// Σ |c|·sign(c)·s = Σ c·s exactly, and a pair is at most 2·128·127 = 32512: no saturation.
inline __m256i pairs_s8s8(__m256i c, __m256i s) { return _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(s, c)); }

// acc + Σ of 4 products u·s per int32 lane, u unsigned and s signed bytes: one VPDPBUSD with
// VNNI; without, the int16 pairs (pairs_u8s8, exact under its bound) widened by VPMADDWD by 1
// and added.
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs_u8s8(u, s), _mm256_set1_epi16(1)));
#endif
}

// acc + Σ of 4 products c·s per int32 lane with both operands signed bytes (pairs_s8s8's
// bounds): dpbusd of |c| and s carrying c's sign, kept in order without VNNI.
inline __m256i dpbusd_signed(__m256i acc, __m256i c, __m256i s) {
  acc = dpbusd(acc, _mm256_abs_epi8(c), _mm256_sign_epi8(s, c));
#if defined(__AVXVNNI__)
  return acc;
#else
  return keep_in_order(acc);
#endif
}

// Σ of 4 products u·s per int32 lane (dpbusd from zero).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(pairs_u8s8(u, s), _mm256_set1_epi16(1));
#endif
}

// Exact sum of the 8 int32 lanes (callers keep the total within int32).
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// IEEE half -> float with F16C: exact, the same value as fp16_to_f32 for every non-NaN
// half (subnormals included), without a function call per block.
inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// Exact lane sums of four int32x8 vectors: lane k of the result is Σ of v_k's 8 lanes.
inline __m128i hsum4_i32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Eight small integers (int32 lanes of `v32`, each in int16 range, e.g. sub-block scales)
// prepared for splat_i16: int32 lane j holds value j in both of its 16-bit halves.
inline __m256i i16_pairs(__m256i v32) {
  return _mm256_or_si256(_mm256_and_si256(v32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v32, 16));
}

// All 16 int16 lanes = value j of the i16_pairs vector (one lane-crossing permute).
inline __m256i splat_i16(__m256i pairs, int j) { return _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(j)); }

// Q4_K / Q5_K sub-block scales and mins of one super-block, unpacked once for all rows.
struct KScaleMin {
  __m256i scale_pairs;  // i16_pairs of sc[0..7] (0..63), for splat_i16(scale_pairs, j)
  __m256i min_per_16;   // 16 int16: m[j] in lanes 2j and 2j+1, to madd with Q8_K bsums
};

// Word-parallel version of kquant::unpack_scale_min over the 12 packed bytes (layout in
// tensor/blocks.h): bytes 0..3 give sc[0..3] / bits 6-7 the high bits of sc[4..7], bytes
// 4..7 the same for the mins, bytes 8..11 the low nibbles of sc[4..7] (low) and m[4..7] (high).
inline KScaleMin unpack_k_scale_min(const uint8_t packed[kKScaleSize]) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof(w));
  const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu;
  const uint32_t m_lo = w[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
  const __m128i sc8 = _mm_cvtsi64_si128(static_cast<int64_t>((uint64_t{sc_hi} << 32) | sc_lo));
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>((uint64_t{m_hi} << 32) | m_lo));
  return {i16_pairs(_mm256_cvtepu8_epi32(sc8)), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8))};
}

// Per-row exact totals of a K-quant block: lane r of `scaled` = Σ of acc[r]'s lanes, lane r
// of `mins` = Σ of min_acc[r]'s lanes (lanes ≥ R are unspecified).
template <int R>
inline void reduce_rows(const __m256i (&acc)[R], const __m256i (&min_acc)[R], __m128i& scaled, __m128i& mins) {
  const __m256i z = _mm256_setzero_si256();
  if constexpr (R <= 2) {
    // One tree for both: lanes [S0, S1, M0, M1].
    scaled = hsum4_i32(acc[0], R > 1 ? acc[R - 1] : z, min_acc[0], R > 1 ? min_acc[R - 1] : z);
    mins = _mm_unpackhi_epi64(scaled, scaled);
  } else {
    scaled = hsum4_i32(acc[0], acc[1], acc[2], R > 3 ? acc[R - 1] : z);
    mins = hsum4_i32(min_acc[0], min_acc[1], min_acc[2], R > 3 ? min_acc[R - 1] : z);
  }
}

// Lane r = exact Σ of acc[r]'s 8 lanes (lanes ≥ R zero).
template <int R>
inline __m128i hsum_rows(const __m256i (&acc)[R]) {
  const __m256i z = _mm256_setzero_si256();
  return hsum4_i32(acc[0], R > 1 ? acc[R > 1 ? 1 : 0] : z, R > 2 ? acc[R > 2 ? 2 : 0] : z,
                   R > 3 ? acc[R > 3 ? 3 : 0] : z);
}

// The R activation rows of a MultiDotFn call as typed pointers.
template <class Block, int R>
struct Rows {
  const Block* p[R];
  Rows(const void* rows, int64_t stride) {
    for (int r = 0; r < R; ++r) p[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + r * stride);
  }
};

// Lane r = Q8_K scale of row r's block b (lanes ≥ R zero).
template <int R>
inline __m128 q8k_scales(const Rows<BlockQ8_K, R>& y, int64_t b) {
  return _mm_setr_ps(y.p[0][b].d, R > 1 ? y.p[R > 1 ? 1 : 0][b].d : 0.0f, R > 2 ? y.p[R > 2 ? 2 : 0][b].d : 0.0f,
                     R > 3 ? y.p[R > 3 ? 3 : 0][b].d : 0.0f);
}

// Lane r = fp16 scale of row r's block b as float (lanes ≥ R zero); Q8_0 activations.
template <int R>
inline __m128 q8_0_scales(const Rows<BlockQ8_0, R>& y, int64_t b) {
  const auto d = [&](int r) { return static_cast<short>(r < R ? y.p[r < R ? r : 0][b].d : 0); };
  return _mm_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), 0, 0, 0, 0));
}

// Q4_K / Q5_K share everything but the code unpacking. Per super-block b:
// k_start_block zeroes the scaled sums and puts Σ_j m_j·(Σ q_a)_j lanes in min_acc;
// k_add_pair adds sub-blocks 2k (codes q_lo) and 2k + 1 (q_hi), times their 6-bit scales;
// k_block_terms is the reference's float step d·d_a·scaled − dmin·d_a·mins, lane r = row r.
template <int R>
inline void k_start_block(const KScaleMin& s, const Rows<BlockQ8_K, R>& y, int64_t b, __m256i (&acc)[R],
                          __m256i (&min_acc)[R]) {
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_si256();
    min_acc[r] =
        _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.p[r][b].bsums)), s.min_per_16);
  }
}

template <int R>
inline void k_add_pair(const KScaleMin& s, const Rows<BlockQ8_K, R>& y, int64_t b, int k, __m256i q_lo, __m256i q_hi,
                       __m256i (&acc)[R]) {
  const __m256i sc_lo = splat_i16(s.scale_pairs, 2 * k);
  const __m256i sc_hi = splat_i16(s.scale_pairs, 2 * k + 1);
  for (int r = 0; r < R; ++r) {
    const int8_t* qa = y.p[r][b].qs + 64 * k;
    const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa));
    const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + 32));
    acc[r] = madd_acc(acc[r], _mm256_maddubs_epi16(q_lo, a_lo), sc_lo);
    acc[r] = madd_acc(acc[r], _mm256_maddubs_epi16(q_hi, a_hi), sc_hi);
  }
}

template <int R>
inline __m128 k_block_terms(const __m256i (&acc)[R], const __m256i (&min_acc)[R], const Rows<BlockQ8_K, R>& y,
                            int64_t b, uint16_t d, uint16_t dmin) {
  __m128i scaled, mins;
  reduce_rows<R>(acc, min_acc, scaled, mins);
  const __m128 d_a = q8k_scales<R>(y, b);
  const __m128 t1 = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(f16(d)), d_a), _mm_cvtepi32_ps(scaled));
  const __m128 t2 = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(f16(dmin)), d_a), _mm_cvtepi32_ps(mins));
  return _mm_sub_ps(t1, t2);
}

// Writes lanes 0..R-1 of `v` to out[0..R-1].
template <int R>
inline void store_rows(__m128 v, float* out) {
  alignas(16) float t[4];
  _mm_store_ps(t, v);
  for (int r = 0; r < R; ++r) out[r] = t[r];
}

// Runs a row-templated kernel body `rows<R>(n, w, a, stride, out)` for n_act rows: one call
// for up to kMaxDotRows rows (the templates are instantiated for R = 1..4).
template <template <int> class Kernel>
inline void dispatch_rows(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  switch (n_act) {
    case 1: Kernel<1>::run(n, w, a, stride, out); break;
    case 2: Kernel<2>::run(n, w, a, stride, out); break;
    case 3: Kernel<3>::run(n, w, a, stride, out); break;
    case 4: Kernel<4>::run(n, w, a, stride, out); break;
    default: CHECK(n_act >= 1 && n_act <= kMaxDotRows);
  }
}

}  // namespace

}  // namespace moetier::cpu::dot::MOETIER_DOT_NS
