// The lanes of the K-quant and IQ4_XS tile kernels (cpu/dot/kquant_tile_driver.h): one
// super-block of 8 rows packed with lane i = row i, and the lane-wise helpers the weight
// families (kquant_tile_<family>.h) unpack their blocks with. Compiled per ISA unit (internal
// linkage); every unit has AVX2, the 512-bit helpers are used by the AVX-512 unit only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/dot.h"
#include "tensor/blocks.h"

// A 512-bit value in a signature changes the ABI where AVX-512 is off, and GCC notes it for
// each such function; the 512-bit helpers are inline and never emitted in those units.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace moetier::cpu::dot::kquant_tile {
namespace {

// One super-block of 8 rows, packed: for each 32-element unit j, 8 steps k of 8 int32 lanes,
// lane i = row i's code bytes u at 32j + 4k .. 32j + 4k + 3 (so one VPDPBUSD against a
// broadcast activation word adds 4 products to each row's sum), and the rows' scales.
struct alignas(32) PackedSuperBlock {
  __m256i codes[8][8];  // [32-element unit j][step k]
  __m256i sc[16];       // [sub-block s]: lane i = row i's integer scale (int32); 8 or 16 used
  __m256i m_pairs[8];   // [t]: lane i = two int16 (low, high): the family's min pairs (meta_one_token: 4 used, two units each)
  __m256 d;             // lane i = row i's d (f32)
  __m256 dmin;          // Q4_K/Q5_K only
};
// With int16 step sums (plain AVX2, kquant_tile_driver.h): sc[s] also as (sc, sc) int16
// pairs, VPMADDWD's operand (fill_sc_pairs).
struct alignas(32) PackedSuperBlockPairs : PackedSuperBlock {
  __m256i sc_pairs[16];
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

// 512-bit forms (AVX512-VNNI's one-token kernels; only compiled where a kernel uses them).
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

// d·d_a·float(scaled − mins): IQ4_XS and Q6_K.
inline __m256 single_scale_finish(const PackedSuperBlock& P, __m256 d_a, __m256i scaled, __m256i mins) {
  return _mm256_mul_ps(_mm256_mul_ps(P.d, d_a), _mm256_cvtepi32_ps(_mm256_sub_epi32(scaled, mins)));
}

}  // namespace
}  // namespace moetier::cpu::dot::kquant_tile
