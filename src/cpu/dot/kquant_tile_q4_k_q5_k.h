// The Q4_K and Q5_K weight families of the tile kernels (kquant_tile_driver.h): how a
// super-block's codes, 6-bit scales and mins are unpacked into the 8 rows' lanes, from the
// file's rows (unit, scales) or an interleaved run (code, code2, codes4, meta, meta_one_token).
// The codes are the stored values (u = q); the mins term is the second integer of the
// reference, sum += d·d_a·float(scaled) − dmin·d_a·float(mins) (docs/numerics.md, "Tile kernels").
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/dot/kquant_tile_lanes.h"
#include "tensor/blocks.h"
#include "tensor/types/k_scale_min.h"

namespace moetier::cpu::dot::kquant_tile {
namespace {

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

inline __m256 k_finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled, __m256i mins) {
  const __m256 pos = _mm256_mul_ps(_mm256_mul_ps(P.d, d_a), _mm256_cvtepi32_ps(scaled));
  const __m256 neg = _mm256_mul_ps(_mm256_mul_ps(P.dmin, d_a), _mm256_cvtepi32_ps(mins));
  return _mm256_sub_ps(pos, neg);
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
  // Steps k and k + 1 (k even) of unit j (AVX-512): code()'s words are consecutive in k.
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 4 + 8 * (j / 2) + k);
    return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm512_set1_epi8(0x0F));
  }
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
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 12 + 8 * (j / 2) + k);
    const __m512i qh = group_word2(run, 4 + k);
    const __m512i high = _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm512_set1_epi8(1));
    const __m512i low = _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (j % 2))), _mm512_set1_epi8(0x0F));
    return _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
  }
};

}  // namespace
}  // namespace moetier::cpu::dot::kquant_tile
