// The IQ4_XS weight family of the tile kernels (kquant_tile_driver.h): how a super-block's
// 4-bit grid indices and 6-bit scales are unpacked into the 8 rows' lanes, from the file's rows
// (unit, scales) or an interleaved run (code, code2, meta, scales_and_d); the codes are the
// non-linear grid's values, shifted by 128 into unsigned bytes for VPDPBUSD or kept signed.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/dot/kquant_tile_lanes.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot::kquant_tile {
namespace {

// IQ4_XS with kCodeOffset 128: u = grid[q] + 128 ∈ [1, 241]; sc_j = ls_j − 32;
// mp_j = 128·sc_j. Bounds: |scaled| ≤ 8 · 32 · 32·241·127, |mins| ≤ 8 · 4096 · 32·127 (< 2^31).
// With kCodeOffset 0 (plain AVX2, iq4_xs_tile_avx2.cpp, whose steps take signed codes) the
// codes are the grid values themselves, c ∈ [−127, 113], with no offset: mp_j = 0, so mins is
// 0 and scaled the same integer as above less the offset, i.e. the same scaled − mins.
// kMinPairs is then false: the min pairs are neither filled nor summed.
template <int kOffset>
struct IQ4XSFamilyWithOffset {
  using Block = BlockIQ4_XS;
  static constexpr bool kSub16 = false;
  // x8_one_token subtracts 128·Σ q_a per unit before the scale instead of a mins sum
  // (128 · 2·127·16 per unit fits int32 with room to spare).
  static constexpr bool kOffsetInSum = true;
  static constexpr int kCodeOffset = kOffset;
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
    if constexpr (kCodeOffset == 0) {
      return _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    } else {
      return _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15);
    }
  }
  static __m256i grid_code(__m256i idx) { return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(grid_table()), idx); }
  // Interleaved: word 0 = (d, scales_h), word 1 = scales_l, qs word q at run word 2 + q. Step k
  // of unit j: the low (k < 4) or high nibbles of qs word 4j + k mod 4.
  static __m256i code(const uint8_t* run, int j, int k) {
    const __m256i v = group_word(run, 2 + 4 * j + k % 4);
    return grid_code(_mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (k / 4))), _mm256_set1_epi8(0x0F)));
  }
  // Steps k and k + 1 (k even; AVX-512): consecutive qs words, the same nibble.
  static __m512i code2(const uint8_t* run, int j, int k) {
    const __m512i v = group_word2(run, 2 + 4 * j + k % 4);
    const __m512i idx = _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(4 * (k / 4))), _mm512_set1_epi8(0x0F));
    return _mm512_shuffle_epi8(_mm512_maskz_broadcast_i32x4(static_cast<__mmask16>(0xFFFF), grid_table()), idx);
  }
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
// The VNNI units' codes (grid + 128, unsigned) and plain AVX2's (the signed grid values).
using IQ4XSFamily = IQ4XSFamilyWithOffset<128>;
using IQ4XSSignedFamily = IQ4XSFamilyWithOffset<0>;

}  // namespace
}  // namespace moetier::cpu::dot::kquant_tile
