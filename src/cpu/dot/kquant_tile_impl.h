// The K-quant and IQ4_XS · Q8_K tile kernels (TileDotFn, cpu/dot.h), one source for the
// ISAs with 256-bit VPDPBUSD and VPDPWSSD: included by kquant_tile_avxvnni.cpp (AVX-VNNI)
// and kquant_tile_avx512.cpp (AVX512-VNNI + VL), which define MOETIER_TILE_DPBUSD,
// MOETIER_TILE_DPWSSD and MOETIER_TILE_NS first; and for plain AVX2 by kquant_tile_avx2.cpp
// and iq4_xs_tile_avx2.cpp, whose steps are avx2_util.h's exact emulations.
//
// Every family's scalar reference (kquant_scalar.cpp) is, per super-block of 256, an exact
// integer sum of codes × activation codes × integer sub-block scales, then one float step.
// Here each weight code is turned into an unsigned byte u = q + c (c a per-family constant:
// 0 for Q4_K/Q5_K, 0 for Q6_K whose stored codes are q + 32, 128 for IQ4_XS's signed grid
// values), so per sub-block s
//   Σ q·q_a = Σ u·q_a − c·(Σ q_a over s),
// and the Σ q_a terms come from the activation's stored 16-element sums (bsums). Per
// super-block and token, lanes = the kTileRows = 8 rows:
//   scaled = Σ_s sc_s · Σ_{e∈s} u_e·q_a,e          (VPDPBUSD steps, then VPMULLD by sc_s)
//   mins   = Σ_t mp_t · (bsums[2t], bsums[2t+1])  (8 VPDPWSSD steps, int16 pairs; the
//            one-token kernels take Q4_K's and Q5_K's in 4 steps of two units each,
//            paired_unit_mins)
// with the pairs mp_t chosen per family so that mins is the reference's second integer:
//   Q4_K/Q5_K: mp_t = (m_t, m_t)                 → sum += d·d_a·float(scaled) − dmin·d_a·float(mins)
//   IQ4_XS:    mp_t = (128·sc_t, 128·sc_t)       → sum += d·d_a·float(scaled − mins)
//   Q6_K:      mp_t = (32·sc_2t, 32·sc_2t+1)     → sum += d·d_a·float(scaled − mins)
// (sub-blocks of 32 elements for the first two, 16 for Q6_K). Every integer is exact in
// int32 (bounds per family below) and the float step is the reference's expression per
// lane, in super-block order, without contraction: every (row, token) is bit-identical to
// the scalar reference.
//
// Packed weights, per super-block: for each 32-element unit j, 8 vectors k of 8 int32
// lanes, lane i = row i's bytes u at 32j+4k .. 32j+4k+3, so
//   VPDPBUSD(acc, W_jk, broadcast(q_a[32j+4k .. +3]))
// adds 4 products to each row's sum. Tokens go 4 at a time with two accumulation chains
// each (8 independent VPDPBUSD chains; 15 of 16 ymm registers).
//
// tile_x8 takes rows the loader interleaved (cpu/interleave.h): lane i of a 32-byte load is
// already row i's word, so each family's code(run, j, k) gives W_jk with the same byte-local
// decoding as unit(), and meta(run, P) fills the scales, min pairs and d from the
// interleaved header words with lane-wise bit arithmetic; no per-call transpose. The integer
// sums and the float step are the ones above, so tile_x8 is bit-identical to the scalar
// reference too.
#pragma once

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "cpu/dot.h"
#include "tensor/blocks.h"
#include "tensor/types/k_scale_min.h"

#if !defined(MOETIER_TILE_DPBUSD) || !defined(MOETIER_TILE_DPWSSD) || !defined(MOETIER_TILE_NS)
#error "define MOETIER_TILE_DPBUSD, MOETIER_TILE_DPWSSD and MOETIER_TILE_NS before including kquant_tile_impl.h"
#endif
#if defined(MOETIER_TILE_PAIRS) && !defined(MOETIER_TILE_ADD_I16)
#error "MOETIER_TILE_PAIRS needs MOETIER_TILE_ADD_I16 (int16 adds kept in order)"
#endif

namespace moetier::cpu::dot::MOETIER_TILE_NS {

namespace {

// One super-block of 8 rows, packed.
struct alignas(32) PackedSuperBlock {
  __m256i codes[8][8];  // [32-element unit j][step k]
  __m256i sc[16];       // [sub-block s]: lane i = row i's integer scale (int32); 8 or 16 used
  __m256i m_pairs[8];   // [t]: lane i = two int16 (low, high), see above (meta_one_token: 4 used, two units each)
  __m256 d;             // lane i = row i's d (f32)
  __m256 dmin;          // Q4_K/Q5_K only
#if defined(MOETIER_TILE_PAIRS)
  __m256i sc_pairs[16];  // plain AVX2: sc[s] as (sc, sc) int16 pairs, VPMADDWD's operand (fill_sc_pairs)
#endif
};

inline int32_t load_word(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// out[k] lane i = in[i] word k (an 8 × 8 transpose of int32).
inline void transpose8(const __m256i (&in)[8], __m256i* out) {
  __m256i t[8], u[8];
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm256_unpacklo_epi32(in[2 * p], in[2 * p + 1]);
    t[2 * p + 1] = _mm256_unpackhi_epi32(in[2 * p], in[2 * p + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    const int o = 4 * h;
    u[o + 0] = _mm256_unpacklo_epi64(t[o + 0], t[o + 2]);
    u[o + 1] = _mm256_unpackhi_epi64(t[o + 0], t[o + 2]);
    u[o + 2] = _mm256_unpacklo_epi64(t[o + 1], t[o + 3]);
    u[o + 3] = _mm256_unpackhi_epi64(t[o + 1], t[o + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
    out[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
  }
}

// rows[i] holds row i's 8 bytes (byte j = value j); out[j] lane i = rows[i] byte j,
// zero- or sign-extended to int32: an 8 × 8 byte transpose, then extension.
template <bool kSigned>
inline void transpose_bytes(const uint64_t (&rows)[8], __m256i* out) {
  const __m128i r01 = _mm_set_epi64x(static_cast<int64_t>(rows[1]), static_cast<int64_t>(rows[0]));
  const __m128i r23 = _mm_set_epi64x(static_cast<int64_t>(rows[3]), static_cast<int64_t>(rows[2]));
  const __m128i r45 = _mm_set_epi64x(static_cast<int64_t>(rows[5]), static_cast<int64_t>(rows[4]));
  const __m128i r67 = _mm_set_epi64x(static_cast<int64_t>(rows[7]), static_cast<int64_t>(rows[6]));
  // Interleave bytes of row pairs, then 16-bit pairs, then 32-bit quads: each 8-byte half of
  // v[q] is value 2q (low) or 2q + 1 (high) across rows 0..7.
  const __m128i t0 = _mm_unpacklo_epi8(r01, _mm_srli_si128(r01, 8));
  const __m128i t1 = _mm_unpacklo_epi8(r23, _mm_srli_si128(r23, 8));
  const __m128i t2 = _mm_unpacklo_epi8(r45, _mm_srli_si128(r45, 8));
  const __m128i t3 = _mm_unpacklo_epi8(r67, _mm_srli_si128(r67, 8));
  const __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
  const __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
  const __m128i v[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                        _mm_unpackhi_epi32(u1, u3)};
  for (int q = 0; q < 4; ++q) {
    if constexpr (kSigned) {
      out[2 * q] = _mm256_cvtepi8_epi32(v[q]);
      out[2 * q + 1] = _mm256_cvtepi8_epi32(_mm_srli_si128(v[q], 8));
    } else {
      out[2 * q] = _mm256_cvtepu8_epi32(v[q]);
      out[2 * q + 1] = _mm256_cvtepu8_epi32(_mm_srli_si128(v[q], 8));
    }
  }
}

// Two int32 vectors' low 16 bits as the (low, high) int16 pair of each lane.
inline __m256i int16_pairs(__m256i low, __m256i high) {
  return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(high, 16));
}

// Word w of an interleaved super-block run (cpu/interleave.h): lane i = row i's bytes
// [4w, 4w + 4) of the block.
inline __m256i group_word(const uint8_t* run, int w) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(run + 32 * w)); }

#if defined(MOETIER_TILE_512)
// (The maskz forms below, with every lane set, are the plain operations without the GCC
// header's undefined source operand, which -Wmaybe-uninitialized reports.)
// Words w and w + 1 of a run in one 512-bit vector: lanes 0..7 = word w of rows 0..7,
// lanes 8..15 = word w + 1 (the 64 bytes are contiguous in the group).
inline __m512i group_word2(const uint8_t* run, int w) { return _mm512_loadu_si512(run + 32 * w); }
// The activation words at p and p + 4 (steps k and k + 1 of a unit): p's in lanes 0..7,
// p + 4's in lanes 8..15, matching group_word2.
inline __m512i act_pair(const int8_t* p) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_maskz_permutexvar_epi32(static_cast<__mmask16>(0xFFFF), idx,
                                        _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// Lanes 0..7 + lanes 8..15 (the two steps' row sums; integer, so exact in any order).
inline __m256i fold_halves(__m512i v) {
  const __mmask8 all = 0xF;
  return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(all, v, 0), _mm512_maskz_extracti64x4_epi64(all, v, 1));
}
#endif

// Eight f16 values in the low (kHigh = false) or high halves of a vector's 32-bit lanes, as f32.
template <bool kHigh>
inline __m256 f16_lanes(__m256i v) {
  const __m256i h = kHigh ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

// Byte `byte` of each 32-bit lane, zero-extended (kSigned = false: one VPSHUFB, whose
// index 0x80 gives a zero byte; lane L of a 128-bit half is its bytes 4L .. 4L + 3) or
// sign-extended.
template <bool kSigned>
inline __m256i lane_byte(__m256i v, int byte) {
  if constexpr (kSigned) return _mm256_srai_epi32(_mm256_sll_epi32(v, _mm_cvtsi32_si128(24 - 8 * byte)), 24);
  const auto pick = [byte](int lane) { return static_cast<int>(0x80808000u | static_cast<uint32_t>(4 * lane + byte)); };
  return _mm256_shuffle_epi8(v, _mm256_setr_epi32(pick(0), pick(1), pick(2), pick(3), pick(0), pick(1), pick(2), pick(3)));
}

// Q4_K's and Q5_K's 8 six-bit scales and mins from the 12 packed bytes (the layout of
// types::kquant::unpack_scale_min, four sub-blocks per 32-bit word), as bytes j = 0..7.
inline void k_scales_mins(const uint8_t packed[kKScaleSize], uint64_t& sc, uint64_t& m) {
  uint32_t u0, u1, u2;
  std::memcpy(&u0, packed, 4);
  std::memcpy(&u1, packed + 4, 4);
  std::memcpy(&u2, packed + 8, 4);
  const uint32_t sc_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;                    // j = 0..3
  const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);        // j = 4..7
  const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
  sc = sc_lo | (uint64_t{sc_hi} << 32);
  m = m_lo | (uint64_t{m_hi} << 32);
}

// A family: Block; unit(x, j) = the 32 bytes u of elements 32j .. 32j+31; kSub16 (Q6_K's
// 16-element sub-blocks); scales(rows, n_rows, b, P) fills P.sc, P.m_pairs, P.d (and
// P.dmin); finish() is the reference's float step.
//
// Q4_K / Q5_K bounds: |scaled| ≤ 8 · 63 · 32·31·127, |mins| ≤ 8 · 63 · 32·127 (< 2^31).
template <class Block>
void k_scales(const Block* const (&rows)[kTileRows], int n_rows, int64_t b, PackedSuperBlock& P) {
  uint64_t sc[8], m[8];
  alignas(32) float d[8], dmin[8];
  for (int i = 0; i < kTileRows; ++i) {
    const bool real = i < n_rows;
    k_scales_mins(rows[i][b].scales, sc[i], m[i]);
    if (!real) sc[i] = m[i] = 0;
    d[i] = real ? _cvtsh_ss(rows[i][b].d) : 0.0f;
    dmin[i] = real ? _cvtsh_ss(rows[i][b].dmin) : 0.0f;
  }
  transpose_bytes<false>(sc, P.sc);
  __m256i mins[8];
  transpose_bytes<false>(m, mins);
  for (int j = 0; j < 8; ++j) P.m_pairs[j] = int16_pairs(mins[j], mins[j]);
  P.d = _mm256_load_ps(d);
  P.dmin = _mm256_load_ps(dmin);
}

__attribute__((optimize("fp-contract=off"))) inline __m256 k_finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled,
                                                                     __m256i mins) {
  const __m256 pos = _mm256_mul_ps(_mm256_mul_ps(P.d, d_a), _mm256_cvtepi32_ps(scaled));
  const __m256 neg = _mm256_mul_ps(_mm256_mul_ps(P.dmin, d_a), _mm256_cvtepi32_ps(mins));
  return _mm256_sub_ps(pos, neg);
}

// d·d_a·float(scaled − mins): IQ4_XS and Q6_K.
__attribute__((optimize("fp-contract=off"))) inline __m256 single_scale_finish(const PackedSuperBlock& P, __m256 d_a,
                                                                                __m256i scaled, __m256i mins) {
  return _mm256_mul_ps(_mm256_mul_ps(P.d, d_a), _mm256_cvtepi32_ps(_mm256_sub_epi32(scaled, mins)));
}

// Q4_K and Q5_K share the scales, mins and float step; they differ in their codes.
struct KScaleMinFamily {
  static constexpr bool kSub16 = false;
  static constexpr bool kOffsetInSum = false;  // x8_one_token: the mins term stays a separate sum
  static constexpr bool kMinPairs = true;      // block_tokens: the mins term is a sum to take
  template <class Block>
  static void scales(const Block* const (&rows)[kTileRows], int n_rows, int64_t b, PackedSuperBlock& P) {
    k_scales(rows, n_rows, b, P);
  }
  static __m256 finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled, __m256i mins) {
    return k_finish(P, d_a, scaled, mins);
  }
  // Interleaved run: word 0 = (d, dmin), words 1..3 = the 12 scale bytes. The bit
  // arithmetic of k_scales_mins, lane-wise: byte j of each lane of sc[0] / m[0] is the scale
  // / min of sub-block j, of sc[1] / m[1] that of sub-block 4 + j. Also fills P.sc, P.d, P.dmin.
  static void scales_mins_d(const uint8_t* run, PackedSuperBlock& P, __m256i (&sc)[2], __m256i (&m)[2]) {
    const __m256i dm = group_word(run, 0), u0 = group_word(run, 1), u1 = group_word(run, 2), u2 = group_word(run, 3);
    const __m256i m3f = _mm256_set1_epi8(0x3F), m0f = _mm256_set1_epi8(0x0F), m03 = _mm256_set1_epi8(0x03);
    sc[0] = _mm256_and_si256(u0, m3f), m[0] = _mm256_and_si256(u1, m3f);
    sc[1] = _mm256_or_si256(_mm256_and_si256(u2, m0f), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), m03), 4));
    m[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m0f),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m03), 4));
    for (int j = 0; j < 4; ++j) {
      P.sc[j] = lane_byte<false>(sc[0], j);
      P.sc[j + 4] = lane_byte<false>(sc[1], j);
    }
    P.d = f16_lanes<false>(dm);
    P.dmin = f16_lanes<true>(dm);
  }
  static void meta(const uint8_t* run, PackedSuperBlock& P) {
    __m256i sc[2], m[2];
    scales_mins_d(run, P, sc, m);
    for (int j = 0; j < 4; ++j) {
      const __m256i lo = lane_byte<false>(m[0], j), hi = lane_byte<false>(m[1], j);
      P.m_pairs[j] = int16_pairs(lo, lo);
      P.m_pairs[j + 4] = int16_pairs(hi, hi);
    }
  }
  // x8_one_token's meta: as meta(), but the mins go in as two sub-blocks per int16 pair,
  // P.m_pairs[0..3] = (m0, m2), (m1, m3), (m4, m6), (m5, m7) (low, high), for paired_unit_mins.
  // A lane's 16-bit halves are bytes (m0, m1) and (m2, m3): masking and shifting them by 8
  // gives the pairs, where meta() builds 8 pair vectors from 8 extracted bytes.
  static void meta_one_token(const uint8_t* run, PackedSuperBlock& P) {
    __m256i sc[2], m[2];
    scales_mins_d(run, P, sc, m);
    const __m256i low_byte = _mm256_set1_epi16(0x00FF);
    for (int h = 0; h < 2; ++h) {
      P.m_pairs[2 * h] = _mm256_and_si256(m[h], low_byte);
      P.m_pairs[2 * h + 1] = _mm256_srli_epi16(m[h], 8);
    }
  }
};

struct Q4KFamily : KScaleMinFamily {
  using Block = BlockQ4_K;
  static constexpr int kMaxAbsCode = 15;
  static __m256i unit(const BlockQ4_K& x, int j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * (j / 2)));
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm256_set1_epi8(0x0F));
  }
  // Interleaved: step k of unit j (elements 32j + 4k .. +3) is in qs word 8·(j/2) + k, run word 4 + that.
  static __m256i code(const uint8_t* run, int j, int k) {
    const __m256i v = group_word(run, 4 + 8 * (j / 2) + k);
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm256_set1_epi8(0x0F));
  }
#if defined(MOETIER_TILE_512)
  // Steps k and k + 1 (k even) of unit j: code()'s words are consecutive in k.
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 4 + 8 * (j / 2) + k);
    return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm512_set1_epi8(0x0F));
  }
#endif
};

struct Q5KFamily : KScaleMinFamily {
  using Block = BlockQ5_K;
  static constexpr int kMaxAbsCode = 31;
  static __m256i unit(const BlockQ5_K& x, int j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * (j / 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh));
    // Bit j of qh[l] is the fifth bit of sub-block j's code l.
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    const __m256i low = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
  // Interleaved: qh word k at run word 4 + k, qs word 8·(j/2) + k at run word 12 + that.
  static __m256i code(const uint8_t* run, int j, int k) {
    const __m256i v = group_word(run, 12 + 8 * (j / 2) + k);
    const __m256i qh = group_word(run, 4 + k);
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    const __m256i low = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
  // The four units 4·half + g (g = 0..3) at step k together (x8_one_token): they share
  // their qh word, and g, g + 1 (g even) a qs word (low and high nibbles). qh's 16-bit lanes
  // shifted right by 4·half put unit 4·half + g's bit at bit g of each byte (g ≤ 3: no bit
  // crosses from the neighbouring byte), and a left shift by 4 − g moves it to bit 4.
  static void codes4(const uint8_t* run, int half, int k, __m256i (&c)[4]) {
    const __m256i a = group_word(run, 12 + 16 * half + k), b = group_word(run, 12 + 16 * half + 8 + k);
    const __m256i qh = _mm256_srl_epi16(group_word(run, 4 + k), _mm_cvtsi32_si128(4 * half));
    const __m256i m0f = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    c[0] = _mm256_or_si256(_mm256_and_si256(a, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m10));
    c[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 3), m10));
    c[2] = _mm256_or_si256(_mm256_and_si256(b, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m10));
    c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 1), m10));
  }
#if defined(MOETIER_TILE_512)
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 12 + 8 * (j / 2) + k);
    const __m512i qh = group_word2(run, 4 + k);
    const __m512i high = _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm512_set1_epi8(1));
    const __m512i low = _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm512_set1_epi8(0x0F));
    return _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
  }
#endif
};

// IQ4_XS: u = grid[q] + 128 ∈ [1, 241]; sc_j = ls_j − 32; mp_j = 128·sc_j. Bounds:
// |scaled| ≤ 8 · 32 · 32·241·127, |mins| ≤ 8 · 4096 · 32·127 (< 2^31).
// With MOETIER_TILE_SIGNED_GRID (plain AVX2, iq4_xs_tile_avx2.cpp, whose MOETIER_TILE_DPBUSD
// takes signed codes) the codes are the grid values themselves, c ∈ [−127, 113], with no
// offset: mp_j = 0 and kCodeOffset = 0, so mins is 0 and scaled the same integer as above less
// the offset, i.e. the same scaled − mins. kMinPairs is then false: the min pairs are neither
// filled nor summed.
struct IQ4XSFamily {
  using Block = BlockIQ4_XS;
  static constexpr bool kSub16 = false;
  // x8_one_token subtracts 128·Σ q_a per unit before the scale instead of a mins sum
  // (128 · 2·127·16 per unit fits int32 with room to spare).
  static constexpr bool kOffsetInSum = true;
#if defined(MOETIER_TILE_SIGNED_GRID)
  static constexpr int kCodeOffset = 0;
#else
  static constexpr int kCodeOffset = 128;
#endif
  static_assert(kCodeOffset == 0 || kCodeOffset == 128);
  static constexpr int kMaxAbsCode = kCodeOffset == 0 ? 127 : 241;  // |grid| ≤ 127; grid + 128 ≤ 241
  // Without the offset the min pairs are all 0: block_tokens skips the mins sum.
  static constexpr bool kMinPairs = kCodeOffset != 0;
  static __m256i unit(const BlockIQ4_XS& x, int j) {
    // Sub-block j: bytes qs[16j .. 16j+15], low nibbles elements 0..15, high ones 16..31.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 16 * j));
    const __m128i mask = _mm_set1_epi8(0x0F);
    return grid_code(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask)));
  }
  // Each byte of idx (a 4-bit code) → grid[code] + kCodeOffset as a byte (unsigned with the
  // offset 128, signed without).
  static __m128i grid_table() {
#if defined(MOETIER_TILE_SIGNED_GRID)
    return _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#else
    return _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15);
#endif
  }
  static __m256i grid_code(__m256i idx) { return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(grid_table()), idx); }
  // Interleaved: word 0 = (d, scales_h), word 1 = scales_l, qs word q at run word 2 + q. Step k
  // of unit j: the low (k < 4) or high nibbles of qs word 4j + k mod 4.
  static __m256i code(const uint8_t* run, int j, int k) {
    const __m256i v = group_word(run, 2 + 4 * j + k % 4);
    return grid_code(_mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (k / 4))), _mm256_set1_epi8(0x0F)));
  }
#if defined(MOETIER_TILE_512)
  // Steps k and k + 1 (k even): consecutive qs words, the same nibble.
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 2 + 4 * j + k % 4);
    const __m512i idx = _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (k / 4))), _mm512_set1_epi8(0x0F));
    return _mm512_shuffle_epi8(_mm512_maskz_broadcast_i32x4(static_cast<__mmask16>(0xFFFF), grid_table()), idx);
  }
#endif
  // P.sc and P.d only (what x8_one_token needs: kOffsetInSum). ls_j = bits 4j..4j+3 of
  // scales_l (as a little-endian word) | bits 2j, 2j+1 of scales_h << 4.
  static void scales_and_d(const uint8_t* run, PackedSuperBlock& P) {
    const __m256i w0 = group_word(run, 0), sl = group_word(run, 1);
    const __m256i sh = _mm256_srli_epi32(w0, 16);
    for (int j = 0; j < 8; ++j) {
      const __m256i low = _mm256_and_si256(_mm256_srl_epi32(sl, _mm_cvtsi32_si128(4 * j)), _mm256_set1_epi32(0x0F));
      const __m256i high = _mm256_and_si256(_mm256_srl_epi32(sh, _mm_cvtsi32_si128(2 * j)), _mm256_set1_epi32(3));
      P.sc[j] = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
    }
    P.d = f16_lanes<false>(w0);
  }
  static void meta(const uint8_t* run, PackedSuperBlock& P) {
    scales_and_d(run, P);
    if constexpr (kMinPairs) {
      for (int j = 0; j < 8; ++j) {
        const __m256i m = _mm256_slli_epi32(P.sc[j], 7);  // 128·sc
        P.m_pairs[j] = int16_pairs(m, m);
      }
    }
  }
  static void scales(const Block* const (&rows)[kTileRows], int n_rows, int64_t b, PackedSuperBlock& P) {
    uint64_t sc[8];
    alignas(32) float d[8];
    for (int i = 0; i < kTileRows; ++i) {
      const BlockIQ4_XS& x = rows[i][b];
      sc[i] = 0;
      for (int j = 0; j < 8 && i < n_rows; ++j) {
        const int ls = ((x.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((x.scales_h >> (2 * j)) & 3) << 4);
        sc[i] |= uint64_t{static_cast<uint8_t>(static_cast<int8_t>(ls - 32))} << (8 * j);
      }
      d[i] = i < n_rows ? _cvtsh_ss(x.d) : 0.0f;
    }
    transpose_bytes<true>(sc, P.sc);
    if constexpr (kMinPairs) {
      for (int j = 0; j < 8; ++j) {
        const __m256i m = _mm256_slli_epi32(P.sc[j], 7);  // 128·sc
        P.m_pairs[j] = int16_pairs(m, m);
      }
    }
    P.d = _mm256_load_ps(d);
  }
  static __m256 finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled, __m256i mins) {
    return single_scale_finish(P, d_a, scaled, mins);
  }
};

// Q6_K: u = the stored 6-bit code (q + 32) ∈ [0, 63]; 16 int8 scales, one per 16 elements;
// mp_t = (32·sc_2t, 32·sc_2t+1). Bounds: |scaled| ≤ 16 · 128 · 16·63·127,
// |mins| ≤ 16 · 4096 · 16·127 (< 2^31).
struct Q6KFamily {
  using Block = BlockQ6_K;
  static constexpr int kMaxAbsCode = 63;
  static constexpr bool kSub16 = true;
  static constexpr bool kOffsetInSum = false;
  static constexpr bool kMinPairs = true;
  static __m256i unit(const BlockQ6_K& x, int j) {
    // Unit j = 4·half + g: ql[64·half + 32·(g & 1) + l] nibble g >> 1, qh[32·half + l] bits 2g, 2g+1.
    const int half = j / 4, g = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * half + 32 * (g & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * half));
    const __m256i low = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (g >> 1))), _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
  // Interleaved: ql words 0..31, qh words 32..47, the 16 scales words 48..51, then the 8
  // rows' d (the 2-byte tail) as 8 contiguous f16.
  static __m256i code(const uint8_t* run, int j, int k) {
    const int half = j / 4, g = j % 4;
    const __m256i ql = group_word(run, 16 * half + 8 * (g & 1) + k);
    const __m256i qh = group_word(run, 32 + 8 * half + k);
    const __m256i low = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (g >> 1))), _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
  // The four units 4·half + g (g = 0..3) at step k together: they share their ql words (g
  // and g + 2: low and high nibbles) and their qh word (bits 2g, 2g + 1, moved to bits 4-5
  // by one 16-bit shift whose spill into the neighbouring byte the mask removes).
  static void codes4(const uint8_t* run, int half, int k, __m256i (&c)[4]) {
    const __m256i a = group_word(run, 16 * half + k), b = group_word(run, 16 * half + 8 + k);
    const __m256i qh = group_word(run, 32 + 8 * half + k);
    const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    c[0] = _mm256_or_si256(_mm256_and_si256(a, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    c[1] = _mm256_or_si256(_mm256_and_si256(b, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m0f), _mm256_and_si256(qh, m30));
    c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m0f), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
  }
#if defined(MOETIER_TILE_512)
  // codes4 for steps k and k + 1 (k even) at once: all three words are consecutive in k.
  static void codes4_2(const uint8_t* run, int half, int k, __m512i (&c)[4]) {
    const __m512i a = group_word2(run, 16 * half + k), b = group_word2(run, 16 * half + 8 + k);
    const __m512i qh = group_word2(run, 32 + 8 * half + k);
    const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    c[0] = _mm512_or_si512(_mm512_and_si512(a, m0f), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
    c[1] = _mm512_or_si512(_mm512_and_si512(b, m0f), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
    c[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m0f), _mm512_and_si512(qh, m30));
    c[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), m0f), _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
  }
#endif
  static void meta(const uint8_t* run, PackedSuperBlock& P) {
    for (int w = 0; w < 4; ++w) {
      const __m256i v = group_word(run, 48 + w);
      for (int byte = 0; byte < 4; ++byte) P.sc[4 * w + byte] = lane_byte<true>(v, byte);
    }
    for (int t = 0; t < 8; ++t) {
      P.m_pairs[t] = int16_pairs(_mm256_slli_epi32(P.sc[2 * t], 5), _mm256_slli_epi32(P.sc[2 * t + 1], 5));
    }
    P.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(run + 52 * 32)));
  }
  static void scales(const Block* const (&rows)[kTileRows], int n_rows, int64_t b, PackedSuperBlock& P) {
    uint64_t lo[8], hi[8];
    alignas(32) float d[8];
    for (int i = 0; i < kTileRows; ++i) {
      const BlockQ6_K& x = rows[i][b];
      std::memcpy(&lo[i], x.scales, 8);
      std::memcpy(&hi[i], x.scales + 8, 8);
      if (i >= n_rows) lo[i] = hi[i] = 0;
      d[i] = i < n_rows ? _cvtsh_ss(x.d) : 0.0f;
    }
    transpose_bytes<true>(lo, P.sc);
    transpose_bytes<true>(hi, P.sc + 8);
    for (int t = 0; t < 8; ++t) {
      P.m_pairs[t] = int16_pairs(_mm256_slli_epi32(P.sc[2 * t], 5), _mm256_slli_epi32(P.sc[2 * t + 1], 5));
    }
    P.d = _mm256_load_ps(d);
  }
  static __m256 finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled, __m256i mins) {
    return single_scale_finish(P, d_a, scaled, mins);
  }
};

// Plain AVX2 (MOETIER_TILE_PAIRS): P.sc as (sc, sc) int16 pairs, once per super-block, after
// the family's scales / meta / scales_and_d filled P.sc. Elsewhere nothing to do.
template <class F>
inline void fill_sc_pairs([[maybe_unused]] PackedSuperBlock& P) {
#if defined(MOETIER_TILE_PAIRS)
  for (int s = 0; s < (F::kSub16 ? 16 : 8); ++s) P.sc_pairs[s] = int16_pairs(P.sc[s], P.sc[s]);
#endif
}

template <class F>
void pack_rows(const TileDotArgs& a, int64_t n_super, PackedSuperBlock* packed) {
  using Block = typename F::Block;
  const Block* rows[kTileRows];
  for (int i = 0; i < kTileRows; ++i) {
    rows[i] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.weight_rows) +
                                             (i < a.n_rows ? i : 0) * a.weight_stride);
  }
  for (int64_t b = 0; b < n_super; ++b) {
    PackedSuperBlock& P = packed[b];
    F::scales(rows, a.n_rows, b, P);
    fill_sc_pairs<F>(P);
    for (int j = 0; j < 8; ++j) {
      __m256i by_row[8];  // [row]: the row's 32 bytes of unit j
      for (int i = 0; i < kTileRows; ++i) by_row[i] = i < a.n_rows ? F::unit(rows[i][b], j) : _mm256_setzero_si256();
      transpose8(by_row, P.codes[j]);
    }
  }
}

// The four units 4·quad + q (q = 0..3) at step k: the family's codes4 where it has one (shared
// loads), else code() per unit.
template <class F>
__attribute__((always_inline)) inline void codes_of_quad(const uint8_t* run, int quad, int k, __m256i (&c)[4]) {
  if constexpr (requires { F::codes4(run, 0, 0, c); }) {
    F::codes4(run, quad, k, c);
  } else {
    for (int q = 0; q < 4; ++q) c[q] = F::code(run, 4 * quad + q, k);
  }
}

#if defined(MOETIER_TILE_PAIRS)
// Plain AVX2 (MOETIER_TILE_PAIRS: one step's products as int16 pairs, VPMADDUBSW). Emulating
// each VPDPBUSD (pairs, VPMADDWD by 1, VPADDD) costs three instructions a step; instead a
// chain adds kI16Steps steps' pairs in int16 (VPADDW), then one VPMADDWD against the rows'
// scales as int16 pairs (sc, sc) gives sc·(those steps' sum) in each int32 lane: the scale
// multiply (VPMULLD) is gone too. A step's pair is at most 2·kMaxAbsCode·127, so kI16Steps
// of them stay within int16: Q4_K 8 (8·3810 = 30480), Q5_K 4 (4·7874), Q6_K 2 (2·16002),
// IQ4_XS's signed grid 1 (32258). sc·(pair sum) is then exact in int32 (|sc| ≤ 128), and
// scaled is the same integer as with VPDPBUSD: bit-identical.
// One core, 16 tokens, interleaved rows (throwaway microbenchmark): Q4_K 79 → 110 GMAC/s,
// Q5_K 76 → 94, Q6_K 71 → 85, IQ4_XS 74 → 78 (AVX-VNNI's tile_x8: Q4_K 94, Q6_K 110,
// IQ4_XS 122).

// Steps per int16 sum: the largest power of two ≤ kSteps whose sum of pairs fits int16.
template <class F, int kSteps>
constexpr int i16_steps() {
  int g = 1;
  while (2 * g <= kSteps && 2 * g * (2 * F::kMaxAbsCode * 127) <= 32767) g *= 2;
  return g;
}
#endif

#if defined(MOETIER_TILE_PAIRS)
// One token against an interleaved run (x8_one_token) on plain AVX2: four units at a time,
// kI16Steps steps' pairs summed in int16 per unit (for Q6_K within a 16-element sub-block),
// then one VPMADDWD by P.sc_pairs into that unit's int32 accumulator. scaled = Σ_s sc_s ·
// Σ u·q_a is the VPDPBUSD path's integer, so the result is bit-identical. No offset is taken
// off the unit sums here: the one family that does so (IQ4_XS) has none with the signed grid.
template <class F>
__attribute__((always_inline)) inline __m256i one_token_pairs(const uint8_t* run, const BlockQ8_K& x,
                                                              const PackedSuperBlock& P) {
  if constexpr (F::kOffsetInSum) static_assert(F::kCodeOffset == 0, "the offset would have to be scaled too");
  constexpr int kSteps = F::kSub16 ? 4 : 8;  // steps per sub-block
  constexpr int kI16Steps = i16_steps<F, kSteps>();
  __m256i acc[4];
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (int quad = 0; quad < 2; ++quad) {
    #pragma GCC unroll 8  // constant step indices: the sums stay in registers
    for (int k0 = 0; k0 < 8; k0 += kI16Steps) {
      __m256i p[4];
      #pragma GCC unroll 8
      for (int k = k0; k < k0 + kI16Steps; ++k) {
        __m256i c[4];
        codes_of_quad<F>(run, quad, k, c);
        for (int q = 0; q < 4; ++q) {
          const __m256i pq = MOETIER_TILE_PAIRS(c[q], _mm256_set1_epi32(load_word(x.qs + 32 * (4 * quad + q) + 4 * k)));
          p[q] = k == k0 ? pq : MOETIER_TILE_ADD_I16(p[q], pq);
        }
      }
      for (int q = 0; q < 4; ++q) {
        const int sub = F::kSub16 ? 8 * quad + 2 * q + k0 / 4 : 4 * quad + q;
        acc[q] = MOETIER_TILE_DPWSSD(acc[q], p[q], P.sc_pairs[sub]);
      }
    }
  }
  return _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
}
#endif

// One super-block of packed rows against T tokens (act[t] = token t's Q8_K row), added to
// sum[t] in super-block order.
template <class F, int T>
__attribute__((optimize("fp-contract=off"))) inline void block_tokens(const PackedSuperBlock& P,
                                                                       const BlockQ8_K* const (&act)[T], int64_t b,
                                                                       __m256 (&sum)[T]) {
  // Two chains per token: units j and j + 1 (8 steps each, scales sc_j, sc_j+1), or for
  // 16-element sub-blocks the two halves of unit j (4 steps each, scales sc_2j, sc_2j+1).
  constexpr int kUnitsPerStep = F::kSub16 ? 1 : 2;
  constexpr int kSteps = F::kSub16 ? 4 : 8;
  __m256i scaled[T];
  for (int t = 0; t < T; ++t) scaled[t] = _mm256_setzero_si256();
#if defined(MOETIER_TILE_PAIRS)
  constexpr int kI16Steps = i16_steps<F, kSteps>();
  static_assert(kSteps % kI16Steps == 0 && 2 * kI16Steps * F::kMaxAbsCode * 127 <= 32767);
  for (int j = 0; j < 8; j += kUnitsPerStep) {
    const int unit0 = j, unit1 = F::kSub16 ? j : j + 1;
    const int k1 = F::kSub16 ? 4 : 0;  // first step of chain 1 in its unit
    const int sub0 = F::kSub16 ? 2 * j : j;
    // Step k's pairs into both chains' int16 sums (kFirst: the sums start there).
    const auto step = [&]<bool kFirst>(int k, __m256i(&p0)[T], __m256i(&p1)[T]) __attribute__((always_inline)) {
      const __m256i w0 = _mm256_load_si256(&P.codes[unit0][k]);
      for (int t = 0; t < T; ++t) {
        const __m256i q = MOETIER_TILE_PAIRS(w0, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit0 + 4 * k)));
        p0[t] = kFirst ? q : MOETIER_TILE_ADD_I16(p0[t], q);
      }
      const __m256i w1 = _mm256_load_si256(&P.codes[unit1][k1 + k]);
      for (int t = 0; t < T; ++t) {
        const __m256i q = MOETIER_TILE_PAIRS(w1, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit1 + 4 * (k1 + k))));
        p1[t] = kFirst ? q : MOETIER_TILE_ADD_I16(p1[t], q);
      }
    };
    for (int k0 = 0; k0 < kSteps; k0 += kI16Steps) {
      __m256i p0[T], p1[T];
      step.template operator()<true>(k0, p0, p1);
      for (int k = k0 + 1; k < k0 + kI16Steps; ++k) step.template operator()<false>(k, p0, p1);
      for (int t = 0; t < T; ++t) {
        scaled[t] = _mm256_add_epi32(scaled[t], _mm256_add_epi32(_mm256_madd_epi16(p0[t], P.sc_pairs[sub0]),
                                                                 _mm256_madd_epi16(p1[t], P.sc_pairs[sub0 + 1])));
      }
    }
  }
#else
  for (int j = 0; j < 8; j += kUnitsPerStep) {
    const int unit0 = j, unit1 = F::kSub16 ? j : j + 1;
    const int k1 = F::kSub16 ? 4 : 0;  // first step of chain 1 in its unit
    const int sub0 = F::kSub16 ? 2 * j : j;
    __m256i s0[T], s1[T];
    for (int t = 0; t < T; ++t) s0[t] = s1[t] = _mm256_setzero_si256();
    for (int k = 0; k < kSteps; ++k) {
      const __m256i w0 = _mm256_load_si256(&P.codes[unit0][k]);
      for (int t = 0; t < T; ++t) {
        s0[t] = MOETIER_TILE_DPBUSD(s0[t], w0, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit0 + 4 * k)));
      }
      const __m256i w1 = _mm256_load_si256(&P.codes[unit1][k1 + k]);
      for (int t = 0; t < T; ++t) {
        s1[t] = MOETIER_TILE_DPBUSD(s1[t], w1, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit1 + 4 * (k1 + k))));
      }
    }
    for (int t = 0; t < T; ++t) {
      scaled[t] = _mm256_add_epi32(scaled[t], _mm256_add_epi32(_mm256_mullo_epi32(s0[t], P.sc[sub0]),
                                                               _mm256_mullo_epi32(s1[t], P.sc[sub0 + 1])));
    }
  }
#endif
  for (int t = 0; t < T; ++t) {
    __m256i mins = _mm256_setzero_si256();
    if constexpr (F::kMinPairs) {
      for (int s = 0; s < 8; ++s) mins = MOETIER_TILE_DPWSSD(mins, P.m_pairs[s], _mm256_set1_epi32(load_word(act[t][b].bsums + 2 * s)));
    }
    sum[t] = _mm256_add_ps(sum[t], F::finish(P, _mm256_set1_ps(act[t][b].d), scaled[t], mins));
  }
}

// Tokens j0 .. j0 + T − 1's Q8_K rows.
template <int T>
void act_rows(const TileDotArgs& a, int64_t j0, const BlockQ8_K* (&act)[T]) {
  for (int t = 0; t < T; ++t) {
    act[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a.activation_rows) + (j0 + t) * a.activation_stride);
  }
}

template <class F, int T>
__attribute__((optimize("fp-contract=off"))) void tile_tokens(const TileDotArgs& a, int64_t n_super, const PackedSuperBlock* packed, int64_t j0) {
  const BlockQ8_K* act[T];
  act_rows<T>(a, j0, act);
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_super; ++b) block_tokens<F, T>(packed[b], act, b, sum);
  for (int t = 0; t < T; ++t) {
    alignas(32) float lanes[kTileRows];
    _mm256_store_ps(lanes, sum[t]);
    float* out = a.out + (j0 + t) * a.out_stride;
    for (int i = 0; i < a.n_rows; ++i) out[i] = lanes[i];
  }
}

// Interleaved rows (cpu/interleave.h), T tokens at j0 for super-block b: the running sums
// live in out between super-blocks (a float store and reload is exact).
template <class F, int T>
__attribute__((optimize("fp-contract=off"))) void x8_block_tokens(const TileDotArgs& a, const PackedSuperBlock& P, int64_t b, int64_t j0) {
  const BlockQ8_K* act[T];
  act_rows<T>(a, j0, act);
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = b == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(a.out + (j0 + t) * a.out_stride);
  block_tokens<F, T>(P, act, b, sum);
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.out + (j0 + t) * a.out_stride, sum[t]);
}

// One token against one interleaved group, codes read straight from the group: four units
// at a time, with one VPDPBUSD chain per 16-element sub-block (Q6_K: 8 chains) or per unit
// (the others: 4 chains, and the next four units' chains overlap them out of order; decoding
// is a stream of weights, and two chains would leave it latency-bound).
// The prefetch runs this many super-block runs ahead: 4.3–6.7 KiB for the four families
// (an 8-row run is 1088–1680 bytes). Two runs (2.2 KiB for IQ4_XS) arrived too late: on 2
// threads streaming 8 random experts from DRAM (throwaway microbenchmark, AVX-VNNI) IQ4_XS
// read 39–45 GB/s at 2 runs and 49–50 at 4, Q4_K 48–51 and 50–51; Q5_K and Q6_K the same
// within the noise. At 8 runs Q4_K fell back to 48.
inline constexpr int64_t kPrefetchRuns = 4;

// The mins term Σ_j m_j · S_j of a 32-element-unit family (S_j = Σ q_a over unit j =
// bsums[2j] + bsums[2j + 1]) in four VPDPWSSD steps of two units each, for the pairs
// P.m_pairs[0..3] = (m0, m2), (m1, m3), (m4, m6), (m5, m7) of meta_one_token: the activation's
// sums are paired the same way. The same integer as meta()'s eight steps of (m_j, m_j) ·
// (bsums[2j], bsums[2j + 1]); |S_j| ≤ 32 · 127 fits int16.
inline __m256i paired_unit_mins(const PackedSuperBlock& P, const BlockQ8_K& x) {
  // int32 lanes S0 .. S3 | S4 .. S7.
  const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)), _mm256_set1_epi16(1));
  // Lanes 0, 1 = (S0, S2), (S1, S3); lanes 4, 5 = (S4, S6), (S5, S7): each lane's high half
  // from the lane two above.
  const __m256i pairs = _mm256_blend_epi16(s, _mm256_slli_epi32(_mm256_bsrli_epi128(s, 8), 16), 0xAA);
  constexpr int kLane[4] = {0, 1, 4, 5};
  __m256i mins = _mm256_setzero_si256();
  for (int p = 0; p < 4; ++p) {
    mins = MOETIER_TILE_DPWSSD(mins, P.m_pairs[p], _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(kLane[p])));
  }
  return mins;
}

// The frame of the one-token kernels: per super-block, the prefetch, the scales (and min
// pairs), the activation's mins term and the float step, around scaled_sum(run, x, P), the
// super-block's Σ_s sc_s · (unit sums) as int32 lanes (for kOffsetInSum families with the
// code offset already taken off each unit's sum, and no mins term).
template <class F, class ScaledSum>
__attribute__((optimize("fp-contract=off"), always_inline)) inline void x8_one_token_frame(
    const TileDotArgs& a, int64_t n_super, const uint8_t* group, const ScaledSum& scaled_sum) {
  constexpr int64_t kRunBytes = kTileRows * sizeof(typename F::Block);
  const auto* act = static_cast<const BlockQ8_K*>(a.activation_rows);
  PackedSuperBlock P;  // scales, mins and d only
  __m256 sum = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_super; ++b) {
    const uint8_t* run = group + b * kRunBytes;
    // Decoding streams the weights: ask for the run kPrefetchRuns ahead, which past the
    // group's end is the next group of the same matrix, what the caller reads next (a
    // prefetch past the tensor's end is harmless).
    for (int64_t at = 0; at < kRunBytes; at += 64) __builtin_prefetch(run + kPrefetchRuns * kRunBytes + at);
    constexpr bool kPairedMins = requires { F::meta_one_token(run, P); };
    if constexpr (kPairedMins) {
      F::meta_one_token(run, P);
    } else if constexpr (F::kOffsetInSum) {
      F::scales_and_d(run, P);  // no min pairs: the offset comes off each unit's sum
    } else {
      F::meta(run, P);
    }
    fill_sc_pairs<F>(P);
    const BlockQ8_K& x = act[b];
    const __m256i scaled = scaled_sum(run, x, P);
    __m256i mins = _mm256_setzero_si256();
    if constexpr (kPairedMins) {
      mins = paired_unit_mins(P, x);
    } else if constexpr (!F::kOffsetInSum) {
      for (int s = 0; s < 8; ++s) mins = MOETIER_TILE_DPWSSD(mins, P.m_pairs[s], _mm256_set1_epi32(load_word(x.bsums + 2 * s)));
    }
    sum = _mm256_add_ps(sum, F::finish(P, _mm256_set1_ps(x.d), scaled, mins));
  }
  _mm256_storeu_ps(a.out, sum);
}

// A unit's sum s (int32 lanes) less, for kOffsetInSum families, the code offset c·Σ q_a over
// the unit (the same integer as the mins term, which then stays 0).
template <class F>
inline __m256i unit_sum(__m256i s, const BlockQ8_K& x, int j) {
  if constexpr (F::kOffsetInSum) {
    return _mm256_sub_epi32(s, _mm256_set1_epi32(F::kCodeOffset * (x.bsums[2 * j] + x.bsums[2 * j + 1])));
  }
  return s;
}

template <class F>
void x8_one_token(const TileDotArgs& a, int64_t n_super, const uint8_t* group) {
  x8_one_token_frame<F>(a, n_super, group, [](const uint8_t* run, const BlockQ8_K& x, const PackedSuperBlock& P)
                                               __attribute__((always_inline)) {
#if defined(MOETIER_TILE_PAIRS)
    return one_token_pairs<F>(run, x, P);
#else
    __m256i scaled = _mm256_setzero_si256();
    if constexpr (F::kSub16) {
      // Per half (units 4h .. 4h + 3, sub-blocks 8h .. 8h + 7): one accumulator per sub-block.
      for (int half = 0; half < 2; ++half) {
        __m256i acc[8];
        for (auto& v : acc) v = _mm256_setzero_si256();
        #pragma GCC unroll 8  // the accumulators stay in registers only if every index is a constant
        for (int k = 0; k < 8; ++k) {
          __m256i c[4];
          F::codes4(run, half, k, c);
          for (int g = 0; g < 4; ++g) {
            const int unit = 4 * half + g;
            acc[2 * g + k / 4] = MOETIER_TILE_DPBUSD(acc[2 * g + k / 4], c[g],
                                                     _mm256_set1_epi32(load_word(x.qs + 32 * unit + 4 * k)));
          }
        }
        for (int i = 0; i < 8; ++i) scaled = _mm256_add_epi32(scaled, _mm256_mullo_epi32(acc[i], P.sc[8 * half + i]));
      }
    } else {
      // Four units at a time, one chain each, steps in the order 0, 4, 1, 5, ... (IQ4_XS's
      // steps k and k + 4 are one word's two nibbles, decoded together). The two quads are
      // independent, so out-of-order execution keeps up to 8 chains in flight; two chains per
      // unit (8 accumulators beside the codes, the activation word and the masks or grid in
      // 16 ymm registers) spilled: one chain made IQ4_XS, whose kernel nothing else changed,
      // 1.08–1.09× faster (AVX-VNNI, one core, in L2, paired in one process).
      for (int j0 = 0; j0 < 8; j0 += 4) {
        __m256i acc[4];
        for (auto& v : acc) v = _mm256_setzero_si256();
        #pragma GCC unroll 8  // the accumulators stay in registers only if every index is a constant
        for (int i = 0; i < 8; ++i) {
          const int k = i / 2 + 4 * (i % 2);
          __m256i c[4];
          codes_of_quad<F>(run, j0 / 4, k, c);
          for (int q = 0; q < 4; ++q) {
            acc[q] = MOETIER_TILE_DPBUSD(acc[q], c[q], _mm256_set1_epi32(load_word(x.qs + 32 * (j0 + q) + 4 * k)));
          }
        }
        for (int q = 0; q < 4; ++q) {
          const __m256i s = unit_sum<F>(acc[q], x, j0 + q);
          scaled = _mm256_add_epi32(scaled, _mm256_mullo_epi32(s, P.sc[j0 + q]));
        }
      }
    }
    return scaled;
#endif
  });
}

#if defined(MOETIER_TILE_512)
// x8_one_token with 512-bit vectors (MOETIER_TILE_512: AVX512-VNNI): each load takes two
// consecutive words of the group (steps k and k + 1 of a unit, group_word2), each VPDPBUSD
// does both steps against the two activation words (act_pair), and the halves are added
// before the scales (fold_halves). The integer sums are the same integers, so the result
// is x8_one_token's bit for bit; half the loads, decode steps and VPDPBUSDs.
template <class F>
void x8_one_token_512(const TileDotArgs& a, int64_t n_super, const uint8_t* group) {
  x8_one_token_frame<F>(a, n_super, group, [](const uint8_t* run, const BlockQ8_K& x, const PackedSuperBlock& P)
                                               __attribute__((always_inline)) {
    __m256i scaled = _mm256_setzero_si256();
    if constexpr (F::kSub16) {
      // Per half (units 4h .. 4h + 3): step pairs 0-1 and 2-3 are sub-block 2g, 4-5 and 6-7
      // sub-block 2g + 1.
      for (int half = 0; half < 2; ++half) {
        __m512i acc[8];
        for (auto& v : acc) v = _mm512_setzero_si512();
        #pragma GCC unroll 8  // the accumulators stay in registers only if every index is a constant
        for (int k = 0; k < 8; k += 2) {
          __m512i c[4];
          F::codes4_2(run, half, k, c);
          for (int g = 0; g < 4; ++g) {
            const int unit = 4 * half + g;
            acc[2 * g + k / 4] = _mm512_dpbusd_epi32(acc[2 * g + k / 4], c[g], act_pair(x.qs + 32 * unit + 4 * k));
          }
        }
        for (int i = 0; i < 8; ++i) {
          scaled = _mm256_add_epi32(scaled, _mm256_mullo_epi32(fold_halves(acc[i]), P.sc[8 * half + i]));
        }
      }
    } else {
      // Four units at a time, two chains each (step pairs 0-1, 4-5 and 2-3, 6-7).
      for (int j0 = 0; j0 < 8; j0 += 4) {
        __m512i acc[4][2];
        for (auto& q : acc) q[0] = q[1] = _mm512_setzero_si512();
        #pragma GCC unroll 8  // the accumulators stay in registers only if every index is a constant
        for (int k = 0; k < 8; k += 2) {
          for (int q = 0; q < 4; ++q) {
            acc[q][(k / 2) & 1] = _mm512_dpbusd_epi32(acc[q][(k / 2) & 1], F::code2(run, j0 + q, k),
                                                      act_pair(x.qs + 32 * (j0 + q) + 4 * k));
          }
        }
        for (int q = 0; q < 4; ++q) {
          const __m256i s = unit_sum<F>(fold_halves(_mm512_add_epi32(acc[q][0], acc[q][1])), x, j0 + q);
          scaled = _mm256_add_epi32(scaled, _mm256_mullo_epi32(s, P.sc[j0 + q]));
        }
      }
    }
    return scaled;
  });
}
#endif

// Super-block run `run` of an interleaved group decoded into P: scales, min pairs, d and the
// codes, as pack_rows gives them from the file's rows.
template <class F>
inline void decode_run(const uint8_t* run, PackedSuperBlock& P) {
  F::meta(run, P);
  fill_sc_pairs<F>(P);
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 8; ++k) P.codes[j][k] = F::code(run, j, k);
  }
}

// body.template operator()<T>(j) for the token groups j .. j + T − 1 of n_act tokens: T = 4
// while 4 remain, then one group of 3, 2 or 1.
template <class Body>
inline void token_groups(int64_t n_act, const Body& body) {
  int64_t j = 0;
  for (; j + 4 <= n_act; j += 4) body.template operator()<4>(j);
  switch (n_act - j) {
    case 3: body.template operator()<3>(j); break;
    case 2: body.template operator()<2>(j); break;
    case 1: body.template operator()<1>(j); break;
    default: break;
  }
}

// Every token against n_super packed super-blocks.
template <class F>
void packed_tokens(const TileDotArgs& a, int64_t n_super, const PackedSuperBlock* packed) {
  token_groups(a.n_act, [&]<int T>(int64_t j) { tile_tokens<F, T>(a, n_super, packed, j); });
}

// From this many tokens on, tile_x8 decodes the whole group before the tokens (below). One
// core, Q4_K (microbenchmark): with VNNI, all first against per super-block is 2% faster at
// 64 tokens and 12% at 512 (119 → 134 GMAC/s), 3% slower at 32 and 20% at 8. Plain AVX2
// (int16 step sums, a larger P) is slower all first at every count (16 tokens: 95 against
// 118; 512: 119 against 126), so there it never is.
#if defined(MOETIER_TILE_PAIRS)
inline constexpr int64_t kDecodeAllTokens = INT64_MAX;
#else
inline constexpr int64_t kDecodeAllTokens = 64;
#endif

// The tile kernel on an interleaved group of kTileRows rows (a.weight_rows; weight_stride
// unused): per super-block the codes are decoded once into P (shifts and masks, no
// transpose) and every token runs over them while they sit in L1; or, from
// kDecodeAllTokens tokens on, all super-blocks first. One token: x8_one_token(_512).
template <class F>
void tile_x8(const TileDotArgs& a) {
  const int64_t n_super = a.n / kQK_K;
  const auto* group = static_cast<const uint8_t*>(a.weight_rows);
  if (a.n_act == 1) {
#if defined(MOETIER_TILE_512)
    x8_one_token_512<F>(a, n_super, group);
#else
    x8_one_token<F>(a, n_super, group);
#endif
    return;
  }
  constexpr int64_t kRunBytes = kTileRows * sizeof(typename F::Block);
  if (a.n_act >= kDecodeAllTokens) {
    // Many tokens: every super-block decoded first, then tile()'s token loop with each token
    // group's sums in registers across the whole row.
    std::vector<PackedSuperBlock> packed(static_cast<size_t>(n_super));  // 2.9 KiB per super-block
    for (int64_t b = 0; b < n_super; ++b) decode_run<F>(group + b * kRunBytes, packed[static_cast<size_t>(b)]);
    packed_tokens<F>(a, n_super, packed.data());
    return;
  }
  PackedSuperBlock P;
  for (int64_t b = 0; b < n_super; ++b) {
    decode_run<F>(group + b * kRunBytes, P);
    token_groups(a.n_act, [&]<int T>(int64_t j) { x8_block_tokens<F, T>(a, P, b, j); });
  }
}

template <class F>
void tile(const TileDotArgs& a) {
  const int64_t n_super = a.n / kQK_K;
  std::vector<PackedSuperBlock> packed(static_cast<size_t>(n_super));  // 2.9 KiB per super-block
  pack_rows<F>(a, n_super, packed.data());
  packed_tokens<F>(a, n_super, packed.data());
}

}  // namespace

}  // namespace moetier::cpu::dot::MOETIER_TILE_NS
