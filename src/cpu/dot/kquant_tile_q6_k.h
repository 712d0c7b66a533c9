// The Q6_K weight family of the tile kernels (kquant_tile_driver.h): how a super-block's
// 6-bit codes (low nibbles in ql, high bits in qh) and 16 int8 scales are unpacked into the 8
// rows' lanes, from the file's rows (unit, scales) or an interleaved run (code, code_of,
// code2_of, codes4, codes4_2, meta). Sub-blocks of 16 elements (kSub16).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/dot/kquant_tile_lanes.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot::kquant_tile {
namespace {

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
  // u − q: the mins term is 32·Σ_s sc_s·bsums[s] (x8_few_tokens starts each chain there).
  static constexpr int kMinOffset = 32;
  // code() of unit 4·half + kG with constant shifts: the low nibble is ql word kG & 1's low
  // (kG < 2) or high half, the two high bits are qh's bits 2·kG, 2·kG + 1 moved to bits 4-5
  // (a 16-bit shift whose spill into the neighbouring byte the mask removes). One body for
  // 256- and 512-bit words: V is a vector of uint16 lanes (GCC vector extension), whose
  // shifts are VPSRLW / VPSLLW and whose masks are the byte masks 0x0F and 0x30 in each byte.
  template <int kG, class V>
  __attribute__((always_inline)) static V code_bits(V ql, V qh) {
    const V low = kG < 2 ? ql : V(ql >> 4);
    const V high = kG == 0 ? V(qh << 4) : kG == 1 ? V(qh << 2) : kG == 2 ? qh : V(qh >> 2);
    return (low & 0x0F0F) | (high & 0x3030);
  }
  template <int kG>
  __attribute__((always_inline)) static __m256i code_of(const uint8_t* run, int half, int k) {
    using V = uint16_t __attribute__((vector_size(32)));
    return __m256i(code_bits<kG>(V(group_word(run, 16 * half + 8 * (kG & 1) + k)), V(group_word(run, 32 + 8 * half + k))));
  }
  // code_of for steps k and k + 1 (k even) at once (AVX-512): lanes 0..7 step k, 8..15 step
  // k + 1 (both words are consecutive in k).
  template <int kG>
  __attribute__((always_inline)) static __m512i code2_of(const uint8_t* run, int half, int k) {
    using V = uint16_t __attribute__((vector_size(64)));
    return __m512i(code_bits<kG>(V(group_word2(run, 16 * half + 8 * (kG & 1) + k)), V(group_word2(run, 32 + 8 * half + k))));
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
  // codes4 for steps k and k + 1 (k even) at once (AVX-512): all three words are consecutive in k.
  static void codes4_2(const uint8_t* run, int half, int k, __m512i (&c)[4]) {
    const __m512i a = group_word2(run, 16 * half + k), b = group_word2(run, 16 * half + 8 + k);
    const __m512i qh = group_word2(run, 32 + 8 * half + k);
    const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    c[0] = _mm512_or_si512(_mm512_and_si512(a, m0f), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
    c[1] = _mm512_or_si512(_mm512_and_si512(b, m0f), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
    c[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m0f), _mm512_and_si512(qh, m30));
    c[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), m0f), _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
  }
  // P.sc and P.d only: x8_few_tokens, whose chains carry the mins term.
  static void scales_and_d(const uint8_t* run, PackedSuperBlock& P) {
    for (int w = 0; w < 4; ++w) {
      const __m256i v = group_word(run, 48 + w);
      for (int byte = 0; byte < 4; ++byte) P.sc[4 * w + byte] = lane_byte<true>(v, byte);
    }
    P.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(run + 52 * 32)));
  }
  static void meta(const uint8_t* run, PackedSuperBlock& P) {
    scales_and_d(run, P);
    for (int t = 0; t < 8; ++t) {
      P.m_pairs[t] = int16_pairs(_mm256_slli_epi32(P.sc[2 * t], 5), _mm256_slli_epi32(P.sc[2 * t + 1], 5));
    }
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

}  // namespace
}  // namespace moetier::cpu::dot::kquant_tile
