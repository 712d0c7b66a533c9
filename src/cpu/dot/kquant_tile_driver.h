// The drivers of the K-quant and IQ4_XS · Q8_K tile kernels (TileDotFn, cpu/dot.h): the loops
// over rows, tokens and super-blocks of `tile` (rows from the file, packed per call) and
// `tile_x8` (rows the loader interleaved, cpu/interleave.h), with the prefetch and the token
// groups. Every (row, token) is bit-identical to the scalar reference: the integer sums are
// exact and the float step is the reference's, per lane and in super-block order
// (docs/numerics.md, "Tile kernels").
//
// Two template parameters: a weight family F (kquant_tile_q4_k_q5_k.h, kquant_tile_q6_k.h,
// kquant_tile_iq4_xs.h: Block; unit(x, j) = the 32 code bytes u of elements 32j .. 32j+31;
// kSub16 for 16-element sub-blocks; scales(rows, n_rows, b, P) and meta(run, P) fill P.sc,
// P.m_pairs, P.d (and P.dmin); code(run, j, k) = step k of unit j of an interleaved run;
// finish() = the reference's float step) and the unit's integer steps I (a struct of static
// functions, one per kquant_tile_<tier>.cpp):
//   dpwssd(acc, a, b)  acc + Σ of the 2 int16 products a·b per int32 lane (VPDPWSSD)
//   dpbusd(acc, u, s)  acc + Σ of the 4 byte products u·s per int32 lane (VPDPBUSD)
//   kI16Pairs          plain AVX2 instead of dpbusd: pairs(u, s) gives a step's products as
//                      int16 pairs (VPMADDUBSW), add_i16(a, b) sums steps in int16 in order,
//                      and one VPMADDWD by the scales widens and scales at once
//   kWide512           the one-token x8 kernels with 512-bit VPDPBUSD (x8_one_token_512), and
//                      the few-token ones of 16-element sub-block families (x8_few_tokens_512)
// Everything has internal linkage: each ISA unit compiles its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/dot.h"
#include "cpu/dot/kquant_tile_lanes.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot::kquant_tile {
namespace {

// The packed super-block of the unit: with int16 step sums it carries the scale pairs too.
template <class I>
using Packed = std::conditional_t<I::kI16Pairs, PackedSuperBlockPairs, PackedSuperBlock>;

// With int16 step sums: P.sc as (sc, sc) int16 pairs, once per super-block, after the
// family's scales / meta / scales_and_d filled P.sc. Otherwise nothing to do.
template <class I, class F>
inline void fill_sc_pairs([[maybe_unused]] Packed<I>& P) {
  if constexpr (I::kI16Pairs) {
    for (int s = 0; s < (F::kSub16 ? 16 : 8); ++s) P.sc_pairs[s] = int16_pairs(P.sc[s], P.sc[s]);
  }
}

template <class I, class F>
void pack_rows(const TileDotArgs& a, int64_t n_super, Packed<I>* packed) {
  using Block = typename F::Block;
  const Block* rows[kTileRows];
  for (int i = 0; i < kTileRows; ++i) {
    rows[i] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.weight_rows) +
                                             (i < a.n_rows ? i : 0) * a.weight_stride);
  }
  for (int64_t b = 0; b < n_super; ++b) {
    Packed<I>& P = packed[b];
    F::scales(rows, a.n_rows, b, P);
    fill_sc_pairs<I, F>(P);
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

// ---- Int16 step sums (kI16Pairs: plain AVX2) ---------------------------------------------
// Emulating each VPDPBUSD (pairs, VPMADDWD by 1, VPADDD) costs three instructions a step;
// instead a chain adds kI16Steps steps' pairs in int16 (VPADDW), then one VPMADDWD against the
// rows' scales as int16 pairs (sc, sc) gives sc·(those steps' sum) in each int32 lane: the
// scale multiply (VPMULLD) is gone too. A step's pair is at most 2·kMaxAbsCode·127, so
// kI16Steps of them stay within int16: Q4_K 8 (8·3810 = 30480), Q5_K 4 (4·7874), Q6_K 2
// (2·16002), IQ4_XS's signed grid 1 (32258). sc·(pair sum) is then exact in int32 (|sc| ≤ 128),
// and scaled is the same integer as with VPDPBUSD: bit-identical.
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

// One token against an interleaved run (x8_one_token) with int16 step sums: four units at a
// time, kI16Steps steps' pairs summed in int16 per unit (for Q6_K within a 16-element
// sub-block), then one VPMADDWD by P.sc_pairs into that unit's int32 accumulator. scaled =
// Σ_s sc_s · Σ u·q_a is the VPDPBUSD path's integer, so the result is bit-identical. No offset
// is taken off the unit sums here: the one family that does so (IQ4_XS) has none with the
// signed grid.
template <class I, class F>
__attribute__((always_inline)) inline __m256i one_token_pairs(const uint8_t* run, const BlockQ8_K& x,
                                                              const Packed<I>& P) {
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
          const __m256i pq = I::pairs(c[q], _mm256_set1_epi32(load_word(x.qs + 32 * (4 * quad + q) + 4 * k)));
          p[q] = k == k0 ? pq : I::add_i16(p[q], pq);
        }
      }
      for (int q = 0; q < 4; ++q) {
        const int sub = F::kSub16 ? 8 * quad + 2 * q + k0 / 4 : 4 * quad + q;
        acc[q] = I::dpwssd(acc[q], p[q], P.sc_pairs[sub]);
      }
    }
  }
  return _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
}

// ---- Packed super-blocks against token groups (tile, and tile_x8 for several tokens) --------

// scaled[t] += Σ_s sc_s · Σ u·q_a over super-block b of packed rows P for T tokens, with
// int16 step sums. Two chains per token: units j and j + 1 (8 steps each, scales sc_j,
// sc_j+1), or for 16-element sub-blocks the two halves of unit j (4 steps each, scales sc_2j,
// sc_2j+1).
// code(j, k) = step k of unit j for the 8 rows: from the packed codes, or decoded straight from
// an interleaved run (x8_few_tokens_pairs).
template <class I, class F, int T, class Codes>
__attribute__((always_inline)) inline void scaled_sums_pairs(const Codes& code, const Packed<I>& P,
                                                             const BlockQ8_K* const (&act)[T], int64_t b,
                                                             __m256i (&scaled)[T]) {
  constexpr int kUnitsPerStep = F::kSub16 ? 1 : 2;
  constexpr int kSteps = F::kSub16 ? 4 : 8;
  constexpr int kI16Steps = i16_steps<F, kSteps>();
  static_assert(kSteps % kI16Steps == 0 && 2 * kI16Steps * F::kMaxAbsCode * 127 <= 32767);
  for (int j = 0; j < 8; j += kUnitsPerStep) {
    const int unit0 = j, unit1 = F::kSub16 ? j : j + 1;
    const int k1 = F::kSub16 ? 4 : 0;  // first step of chain 1 in its unit
    const int sub0 = F::kSub16 ? 2 * j : j;
    // Step k's pairs into both chains' int16 sums (kFirst: the sums start there).
    const auto step = [&]<bool kFirst>(int k, __m256i(&p0)[T], __m256i(&p1)[T]) __attribute__((always_inline)) {
      const __m256i w0 = code(unit0, k);
      for (int t = 0; t < T; ++t) {
        const __m256i q = I::pairs(w0, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit0 + 4 * k)));
        p0[t] = kFirst ? q : I::add_i16(p0[t], q);
      }
      const __m256i w1 = code(unit1, k1 + k);
      for (int t = 0; t < T; ++t) {
        const __m256i q = I::pairs(w1, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit1 + 4 * (k1 + k))));
        p1[t] = kFirst ? q : I::add_i16(p1[t], q);
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
}

// The same with VPDPBUSD: each chain's exact step sums, then VPMULLD by the scale.
template <class I, class F, int T, class Codes>
__attribute__((always_inline)) inline void scaled_sums_dpbusd(const Codes& code, const Packed<I>& P,
                                                              const BlockQ8_K* const (&act)[T], int64_t b,
                                                              __m256i (&scaled)[T]) {
  constexpr int kUnitsPerStep = F::kSub16 ? 1 : 2;
  constexpr int kSteps = F::kSub16 ? 4 : 8;
  for (int j = 0; j < 8; j += kUnitsPerStep) {
    const int unit0 = j, unit1 = F::kSub16 ? j : j + 1;
    const int k1 = F::kSub16 ? 4 : 0;  // first step of chain 1 in its unit
    const int sub0 = F::kSub16 ? 2 * j : j;
    __m256i s0[T], s1[T];
    for (int t = 0; t < T; ++t) s0[t] = s1[t] = _mm256_setzero_si256();
    for (int k = 0; k < kSteps; ++k) {
      const __m256i w0 = code(unit0, k);
      for (int t = 0; t < T; ++t) {
        s0[t] = I::dpbusd(s0[t], w0, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit0 + 4 * k)));
      }
      const __m256i w1 = code(unit1, k1 + k);
      for (int t = 0; t < T; ++t) {
        s1[t] = I::dpbusd(s1[t], w1, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * unit1 + 4 * (k1 + k))));
      }
    }
    for (int t = 0; t < T; ++t) {
      scaled[t] = _mm256_add_epi32(scaled[t], _mm256_add_epi32(_mm256_mullo_epi32(s0[t], P.sc[sub0]),
                                                               _mm256_mullo_epi32(s1[t], P.sc[sub0 + 1])));
    }
  }
}

// One super-block against T tokens (act[t] = token t's Q8_K row), added to sum[t] in
// super-block order: P's scales, mins and d, and the codes from code(j, k) (scaled_sums_pairs).
template <class I, class F, int T, class Codes>
__attribute__((always_inline)) inline void block_tokens_from(
    const Codes& code, const Packed<I>& P, const BlockQ8_K* const (&act)[T], int64_t b, __m256 (&sum)[T]) {
  __m256i scaled[T];
  for (int t = 0; t < T; ++t) scaled[t] = _mm256_setzero_si256();
  if constexpr (I::kI16Pairs) {
    scaled_sums_pairs<I, F, T>(code, P, act, b, scaled);
  } else {
    scaled_sums_dpbusd<I, F, T>(code, P, act, b, scaled);
  }
  for (int t = 0; t < T; ++t) {
    __m256i mins = _mm256_setzero_si256();
    if constexpr (F::kMinPairs) {
      for (int s = 0; s < 8; ++s) mins = I::dpwssd(mins, P.m_pairs[s], _mm256_set1_epi32(load_word(act[t][b].bsums + 2 * s)));
    }
    sum[t] = _mm256_add_ps(sum[t], F::finish(P, _mm256_set1_ps(act[t][b].d), scaled[t], mins));
  }
}

// block_tokens_from with the packed codes P.codes.
template <class I, class F, int T>
inline void block_tokens(const Packed<I>& P, const BlockQ8_K* const (&act)[T], int64_t b, __m256 (&sum)[T]) {
  block_tokens_from<I, F, T>([&](int j, int k) __attribute__((always_inline)) { return _mm256_load_si256(&P.codes[j][k]); },
                             P, act, b, sum);
}

// Tokens j0 .. j0 + T − 1's Q8_K rows.
template <int T>
void act_rows(const TileDotArgs& a, int64_t j0, const BlockQ8_K* (&act)[T]) {
  for (int t = 0; t < T; ++t) {
    act[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a.activation_rows) + (j0 + t) * a.activation_stride);
  }
}

// The token-group kernels (tile_tokens, x8_block_tokens and the few-token ones below) are
// noinline: inlined into tile_x8 beside the one-token path they made it one function of
// ~28 KiB per family, and the one-token Q6_K kernel ran at ~0.7x its speed in cache on one
// core (throwaway microbenchmark, AVX-VNNI, AMD EPYC).
template <class I, class F, int T>
__attribute__((noinline)) void tile_tokens(const TileDotArgs& a, int64_t n_super, const Packed<I>* packed, int64_t j0) {
  const BlockQ8_K* act[T];
  act_rows<T>(a, j0, act);
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_super; ++b) block_tokens<I, F, T>(packed[b], act, b, sum);
  for (int t = 0; t < T; ++t) {
    alignas(32) float lanes[kTileRows];
    _mm256_store_ps(lanes, sum[t]);
    float* out = a.out + (j0 + t) * a.out_stride;
    for (int i = 0; i < a.n_rows; ++i) out[i] = lanes[i];
  }
}

// Interleaved rows (cpu/interleave.h), T tokens at j0 for super-block b: the running sums
// live in out between super-blocks (a float store and reload is exact).
template <class I, class F, int T>
__attribute__((noinline)) void x8_block_tokens(const TileDotArgs& a, const Packed<I>& P, int64_t b, int64_t j0) {
  const BlockQ8_K* act[T];
  act_rows<T>(a, j0, act);
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = b == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(a.out + (j0 + t) * a.out_stride);
  block_tokens<I, F, T>(P, act, b, sum);
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.out + (j0 + t) * a.out_stride, sum[t]);
}

// ---- One token against an interleaved group (decode) ---------------------------------------
// Codes read straight from the group: four units at a time, with one VPDPBUSD chain per
// 16-element sub-block (Q6_K: 8 chains) or per unit (the others: 4 chains, and the next four
// units' chains overlap them out of order; decoding is a stream of weights, and two chains
// would leave it latency-bound).
// The prefetch runs this many super-block runs ahead: 4.3–6.7 KiB for the four families
// (an 8-row run is 1088–1680 bytes). Two runs (2.2 KiB for IQ4_XS) arrived too late: on 2
// threads streaming 8 random experts from DRAM (throwaway microbenchmark, AVX-VNNI) IQ4_XS
// read 39–45 GB/s at 2 runs and 49–50 at 4, Q4_K 48–51 and 50–51; Q5_K and Q6_K the same
// within the noise. At 8 runs Q4_K fell back to 48.
inline constexpr int64_t kPrefetchRuns = 4;

// Decoding streams the weights: ask for the run kPrefetchRuns ahead of `run`, which past the
// group's end is the next group of the same matrix, what the caller reads next (a prefetch
// past the tensor's end is harmless).
template <class F>
__attribute__((always_inline)) inline void prefetch_ahead(const uint8_t* run) {
  constexpr int64_t kRunBytes = kTileRows * sizeof(typename F::Block);
  for (int64_t at = 0; at < kRunBytes; at += 64) __builtin_prefetch(run + kPrefetchRuns * kRunBytes + at);
}

// The mins term Σ_j m_j · S_j of a 32-element-unit family (S_j = Σ q_a over unit j =
// bsums[2j] + bsums[2j + 1]) in four VPDPWSSD steps of two units each, for the pairs
// P.m_pairs[0..3] = (m0, m2), (m1, m3), (m4, m6), (m5, m7) of meta_one_token: the activation's
// sums are paired the same way. The same integer as meta()'s eight steps of (m_j, m_j) ·
// (bsums[2j], bsums[2j + 1]); |S_j| ≤ 32 · 127 fits int16.
template <class I>
inline __m256i paired_unit_mins(const PackedSuperBlock& P, const BlockQ8_K& x) {
  // int32 lanes S0 .. S3 | S4 .. S7.
  const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)), _mm256_set1_epi16(1));
  // Lanes 0, 1 = (S0, S2), (S1, S3); lanes 4, 5 = (S4, S6), (S5, S7): each lane's high half
  // from the lane two above.
  const __m256i pairs = _mm256_blend_epi16(s, _mm256_slli_epi32(_mm256_bsrli_epi128(s, 8), 16), 0xAA);
  constexpr int kLane[4] = {0, 1, 4, 5};
  __m256i mins = _mm256_setzero_si256();
  for (int p = 0; p < 4; ++p) {
    mins = I::dpwssd(mins, P.m_pairs[p], _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(kLane[p])));
  }
  return mins;
}

// The frame of the kernels that read the codes straight from an interleaved group (one token
// and a few, tokens j0 .. j0 + T − 1): per super-block b the prefetch, then
// super_block(run, act, b, sum), which adds the super-block's terms to each token's 8 float
// lanes; then the stores.
template <class F, int T, class SuperBlock>
__attribute__((always_inline)) inline void x8_tokens_frame(const TileDotArgs& a, int64_t n_super, const uint8_t* group,
                                                           int64_t j0, const SuperBlock& super_block) {
  constexpr int64_t kRunBytes = kTileRows * sizeof(typename F::Block);
  const BlockQ8_K* act[T];
  act_rows<T>(a, j0, act);
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_super; ++b) {
    const uint8_t* run = group + b * kRunBytes;
    prefetch_ahead<F>(run);
    super_block(run, act, b, sum);
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.out + (j0 + t) * a.out_stride, sum[t]);
}

// The one-token kernels' super-block step: the scales (and min pairs), the activation's mins
// term and the float step, around scaled_sum(run, x, P), the super-block's
// Σ_s sc_s · (unit sums) as int32 lanes (for kOffsetInSum families with the code offset
// already taken off each unit's sum, and no mins term).
template <class I, class F, class ScaledSum>
__attribute__((always_inline)) inline void x8_one_token_frame(const TileDotArgs& a, int64_t n_super, const uint8_t* group,
                                                              const ScaledSum& scaled_sum) {
  Packed<I> P;  // scales, mins and d only
  x8_tokens_frame<F, 1>(a, n_super, group, 0, [&](const uint8_t* run, const BlockQ8_K* const (&act)[1], int64_t b,
                                                  __m256 (&sum)[1]) __attribute__((always_inline)) {
    constexpr bool kPairedMins = requires { F::meta_one_token(run, P); };
    if constexpr (kPairedMins) {
      F::meta_one_token(run, P);
    } else if constexpr (F::kOffsetInSum) {
      F::scales_and_d(run, P);  // no min pairs: the offset comes off each unit's sum
    } else {
      F::meta(run, P);
    }
    fill_sc_pairs<I, F>(P);
    const BlockQ8_K& x = act[0][b];
    const __m256i scaled = scaled_sum(run, x, P);
    __m256i mins = _mm256_setzero_si256();
    if constexpr (kPairedMins) {
      mins = paired_unit_mins<I>(P, x);
    } else if constexpr (!F::kOffsetInSum) {
      for (int s = 0; s < 8; ++s) mins = I::dpwssd(mins, P.m_pairs[s], _mm256_set1_epi32(load_word(x.bsums + 2 * s)));
    }
    sum[0] = _mm256_add_ps(sum[0], F::finish(P, _mm256_set1_ps(x.d), scaled, mins));
  });
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

template <class I, class F>
void x8_one_token(const TileDotArgs& a, int64_t n_super, const uint8_t* group) {
  x8_one_token_frame<I, F>(a, n_super, group, [](const uint8_t* run, const BlockQ8_K& x, const Packed<I>& P)
                                                  __attribute__((always_inline)) {
    if constexpr (I::kI16Pairs) {
      return one_token_pairs<I, F>(run, x, P);
    } else {
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
              acc[2 * g + k / 4] = I::dpbusd(acc[2 * g + k / 4], c[g], _mm256_set1_epi32(load_word(x.qs + 32 * unit + 4 * k)));
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
              acc[q] = I::dpbusd(acc[q], c[q], _mm256_set1_epi32(load_word(x.qs + 32 * (j0 + q) + 4 * k)));
            }
          }
          for (int q = 0; q < 4; ++q) {
            const __m256i s = unit_sum<F>(acc[q], x, j0 + q);
            scaled = _mm256_add_epi32(scaled, _mm256_mullo_epi32(s, P.sc[j0 + q]));
          }
        }
      }
      return scaled;
    }
  });
}

// x8_one_token with 512-bit vectors (kWide512: AVX512-VNNI): each load takes two consecutive
// words of the group (steps k and k + 1 of a unit, group_word2), each VPDPBUSD does both steps
// against the two activation words (act_pair), and the halves are added before the scales
// (fold_halves). The integer sums are the same integers, so the result is x8_one_token's bit
// for bit; half the loads, decode steps and VPDPBUSDs.
template <class I, class F>
void x8_one_token_512(const TileDotArgs& a, int64_t n_super, const uint8_t* group) {
  x8_one_token_frame<I, F>(a, n_super, group, [](const uint8_t* run, const BlockQ8_K& x, const Packed<I>& P)
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

// ---- A few tokens against an interleaved group (a verify step, -np slots, an expert's tokens)
// The VNNI tiers. At 2-15 tokens the products, not the bytes, bound the kernel, so every
// vector instruction that is not a VPDPBUSD counts. Unit by unit, step by step: a unit's code
// word is decoded once straight from the group (constant unit and step: shifts by constants)
// and feeds the T tokens' chains, one per token (for 16-element sub-blocks, Q6_K: one per
// sub-block, 4 steps); then each chain times its scale goes into the token's scaled sum. The
// super-block's scales, mins and d are read once for the T tokens. The mins term:
//   - Q6_K rides in the chains' start: a chain of sub-block s starts at −32·bsums[s]
//     (kMinOffset) instead of 0, so Σ_s sc_s·chain_s is scaled − mins, the reference's
//     integer, without the 8 VPDPWSSD a token and super-block of the mins pairs;
//   - Q4_K/Q5_K: paired_unit_mins, as for one token (4 VPDPWSSD);
//   - IQ4_XS: the code offset comes off each unit's sum (unit_sum), as for one token.
// Bit-identical to the scalar reference: the same integers and float steps as
// x8_block_tokens, which decodes every code into memory first and at 2-15 tokens cost more
// than the products (a 4-token Q6_K LM head took 4 one-token heads' time; Q4_K at 2 tokens,
// an expert shared by two tokens of a step, ran at 0.6x one token's bytes per second).
inline constexpr int64_t kFewTokens = 16;

// The chain starts of a 16-element-sub-block family for T tokens at super-block b:
// start[t][s] = −kMinOffset·bsums[s] of token t (|·| ≤ 32·16·127), so that Σ_s sc_s·chain_s
// is scaled − mins. Returned through an opaque pointer: each chain's start is then one
// broadcast load, where GCC would otherwise keep the values in registers and shuffle them out
// (two shuffles a chain, and spills).
template <class F, int T>
__attribute__((always_inline)) inline const int32_t (*chain_starts(const BlockQ8_K* const (&act)[T], int64_t b,
                                                                   int32_t (&start)[T][16]))[16] {
  static_assert(F::kMinOffset == 32, "a shift by 5");
  for (int t = 0; t < T; ++t) {
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t][b].bsums));
    const __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(bsums));
    const __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(bsums, 1));
    _mm256_store_si256(reinterpret_cast<__m256i*>(start[t]), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(lo, 5)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(start[t] + 8), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(hi, 5)));
  }
  const int32_t(*starts)[16] = start;
  __asm__("" : "+r"(starts) : : "memory");
  return starts;
}

template <class I, class F, int T>
__attribute__((noinline)) void x8_few_tokens(const TileDotArgs& a, int64_t n_super, const uint8_t* group, int64_t j0) {
  static_assert(!I::kI16Pairs);
  Packed<I> P;
  x8_tokens_frame<F, T>(a, n_super, group, j0, [&](const uint8_t* run, const BlockQ8_K* const (&act)[T], int64_t b,
                                                   __m256 (&sum)[T]) __attribute__((always_inline)) {
    // The mins term goes in the paired sums, in each unit's sum (the offset) or in the
    // chains' start (16-element sub-blocks); the latter two need only the scales and d.
    constexpr bool kPairedMins = requires { F::meta_one_token(run, P); };
    static_assert(kPairedMins || F::kOffsetInSum || F::kSub16, "a family whose mins term x8_few_tokens does not take");
    if constexpr (kPairedMins) {
      F::meta_one_token(run, P);
    } else {
      F::scales_and_d(run, P);
    }
    // 16-element sub-blocks: start[t][s] = −kMinOffset·bsums[s] of token t.
    alignas(32) int32_t start[F::kSub16 ? T : 1][16];
    const int32_t(*starts)[16] = start;
    if constexpr (F::kSub16) starts = chain_starts<F, T>(act, b, start);
    __m256i scaled[T];
    for (int t = 0; t < T; ++t) scaled[t] = _mm256_setzero_si256();
    // scaled[t] += chain·sc, here and not later: GCC would otherwise keep all a token's
    // chains to the end (spilled) and sum them in a tree.
    const auto add_scaled = [&](int t, __m256i chain, __m256i sc) __attribute__((always_inline)) {
      scaled[t] = _mm256_add_epi32(scaled[t], _mm256_mullo_epi32(chain, sc));
      __asm__("" : "+x"(scaled[t]));
    };
    const auto unit = [&]<int kUnit>() __attribute__((always_inline)) {
      if constexpr (F::kSub16) {
        #pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-block 2·kUnit + half
          const int sub = 2 * kUnit + half;
          __m256i acc[T];
          for (int t = 0; t < T; ++t) acc[t] = _mm256_set1_epi32(starts[t][sub]);
          #pragma GCC unroll 4
          for (int k = 4 * half; k < 4 * half + 4; ++k) {
            const __m256i c = F::template code_of<kUnit % 4>(run, kUnit / 4, k);
            for (int t = 0; t < T; ++t) {
              acc[t] = I::dpbusd(acc[t], c, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * kUnit + 4 * k)));
            }
          }
          for (int t = 0; t < T; ++t) add_scaled(t, acc[t], P.sc[sub]);
        }
      } else {
        __m256i acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i c = F::code(run, kUnit, k);
          for (int t = 0; t < T; ++t) {
            acc[t] = I::dpbusd(acc[t], c, _mm256_set1_epi32(load_word(act[t][b].qs + 32 * kUnit + 4 * k)));
          }
        }
        for (int t = 0; t < T; ++t) add_scaled(t, unit_sum<F>(acc[t], act[t][b], kUnit), P.sc[kUnit]);
      }
    };
    [&]<int... kUnit>(std::integer_sequence<int, kUnit...>) __attribute__((always_inline)) {
      (unit.template operator()<kUnit>(), ...);
    }(std::make_integer_sequence<int, 8>{});
    for (int t = 0; t < T; ++t) {
      __m256i mins = _mm256_setzero_si256();  // Q6_K: in the chains; IQ4_XS: in unit_sum
      if constexpr (kPairedMins) mins = paired_unit_mins<I>(P, act[t][b]);
      sum[t] = _mm256_add_ps(sum[t], F::finish(P, _mm256_set1_ps(act[t][b].d), scaled[t], mins));
    }
  });
}

// x8_few_tokens for 16-element sub-blocks (Q6_K) with 512-bit vectors (kWide512:
// AVX512-VNNI), as x8_one_token_512 runs one token: each load takes steps k and k + 1 of a
// unit (code2_of), each VPDPBUSD does both against the token's two activation words
// (act_pair), and a sub-block's chain is two of them. The chains start at the token's mins
// term in the lower half (steps k's lanes) and 0 in the upper; each chain times its scale,
// put in both halves, goes into the token's 512-bit scaled sum, whose halves are added once
// per super-block (fold_halves). The same integers in other lanes, so bit-identical to
// x8_few_tokens; half the loads, which at 4 tokens are what the 256-bit kernel waits on (AMD
// EPYC, AVX-512: 1.09–1.36× its GMAC/s in cache, 1.10–1.27× from memory, docs/small-batches.md).
template <class I, class F, int T>
__attribute__((noinline)) void x8_few_tokens_512(const TileDotArgs& a, int64_t n_super, const uint8_t* group, int64_t j0) {
  static_assert(I::kWide512 && F::kSub16);
  Packed<I> P;  // scales and d only: the mins term rides in the chains' start
  x8_tokens_frame<F, T>(a, n_super, group, j0, [&](const uint8_t* run, const BlockQ8_K* const (&act)[T], int64_t b,
                                                   __m256 (&sum)[T]) __attribute__((always_inline)) {
    F::scales_and_d(run, P);
    alignas(32) int32_t start[T][16];
    const int32_t(*starts)[16] = chain_starts<F, T>(act, b, start);
    __m512i scaled[T];
    for (int t = 0; t < T; ++t) scaled[t] = _mm512_setzero_si512();
    const auto unit = [&]<int kUnit>() __attribute__((always_inline)) {
      #pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-block 2·kUnit + half
        const int sub = 2 * kUnit + half;
        __m512i acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_maskz_set1_epi32(0x00FF, starts[t][sub]);
        #pragma GCC unroll 2
        for (int k = 4 * half; k < 4 * half + 4; k += 2) {
          const __m512i c = F::template code2_of<kUnit % 4>(run, kUnit / 4, k);
          for (int t = 0; t < T; ++t) acc[t] = _mm512_dpbusd_epi32(acc[t], c, act_pair(act[t][b].qs + 32 * kUnit + 4 * k));
        }
        const __m512i sc = _mm512_maskz_broadcast_i64x4(0xFF, P.sc[sub]);  // maskz: no undefined upper part
        for (int t = 0; t < T; ++t) {
          scaled[t] = _mm512_add_epi32(scaled[t], _mm512_mullo_epi32(acc[t], sc));
          __asm__("" : "+v"(scaled[t]));  // summed here, not kept to the end (as x8_few_tokens)
        }
      }
    };
    [&]<int... kUnit>(std::integer_sequence<int, kUnit...>) __attribute__((always_inline)) {
      (unit.template operator()<kUnit>(), ...);
    }(std::make_integer_sequence<int, 8>{});
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm256_add_ps(sum[t], F::finish(P, _mm256_set1_ps(act[t][b].d), fold_halves(scaled[t]), _mm256_setzero_si256()));
    }
  });
}

// The same for plain AVX2 (int16 step sums, kI16Pairs), up to one token group (4 tokens): per
// super-block the scales, mins and d once, then block_tokens_from with the codes decoded
// straight from the run, where x8_block_tokens first decodes the run into P.codes (64 stores
// and as many reloads). The same integers and float steps, so bit-identical to both. Two
// threads, 8-row groups of n_in 2048 streamed from memory (throwaway microbenchmark,
// --cpu-isa avx2-novnni on an AVX-512 machine, three alternated runs): Q4_K 1.32–1.43× the
// GMAC/s at 2 tokens, 1.24–1.26× at 3, 1.08–1.13× at 4; Q6_K 1.04–1.15× at 2–4 (one noisy
// run aside). From 5 tokens on, a second token group would decode every code again: Q6_K at
// 6 and 8 tokens lost 17–18%, so there the decoded run is kept.
inline constexpr int64_t kFewTokensPairs = 5;

template <class I, class F, int T>
__attribute__((noinline)) void x8_few_tokens_pairs(const TileDotArgs& a, int64_t n_super, const uint8_t* group, int64_t j0) {
  static_assert(I::kI16Pairs);
  Packed<I> P;  // scales, mins and d only
  x8_tokens_frame<F, T>(a, n_super, group, j0, [&](const uint8_t* run, const BlockQ8_K* const (&act)[T], int64_t b,
                                                   __m256 (&sum)[T]) __attribute__((always_inline)) {
    F::meta(run, P);
    fill_sc_pairs<I, F>(P);
    block_tokens_from<I, F, T>([run](int j, int k) __attribute__((always_inline)) { return F::code(run, j, k); }, P,
                               act, b, sum);
  });
}

// ---- The entry points ----------------------------------------------------------------------

// Super-block run `run` of an interleaved group decoded into P: scales, min pairs, d and the
// codes, as pack_rows gives them from the file's rows.
template <class I, class F>
inline void decode_run(const uint8_t* run, Packed<I>& P) {
  F::meta(run, P);
  fill_sc_pairs<I, F>(P);
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
template <class I, class F>
void packed_tokens(const TileDotArgs& a, int64_t n_super, const Packed<I>* packed) {
  token_groups(a.n_act, [&]<int T>(int64_t j) { tile_tokens<I, F, T>(a, n_super, packed, j); });
}

// From this many tokens on, tile_x8 decodes the whole group before the tokens (below). One
// core, Q4_K (microbenchmark): with VNNI, all first against per super-block is 2% faster at
// 64 tokens and 12% at 512 (119 → 134 GMAC/s), 3% slower at 32 and 20% at 8. With int16 step
// sums (plain AVX2, a larger P) all first is slower at every count (16 tokens: 95 against
// 118; 512: 119 against 126), so there it never is.
template <class I>
inline constexpr int64_t kDecodeAllTokens = I::kI16Pairs ? INT64_MAX : 64;

// The tile kernel on an interleaved group of kTileRows rows (a.weight_rows; weight_stride
// unused): per super-block the codes are decoded once into P (shifts and masks, no
// transpose) and every token runs over them while they sit in L1; or, from
// kDecodeAllTokens tokens on, all super-blocks first. One token: x8_one_token(_512); a few
// tokens, codes read straight from the group: x8_few_tokens (VNNI, below kFewTokens; Q6_K on
// AVX-512: x8_few_tokens_512) and x8_few_tokens_pairs (plain AVX2, below kFewTokensPairs).
template <class I, class F>
void tile_x8(const TileDotArgs& a) {
  const int64_t n_super = a.n / kQK_K;
  const auto* group = static_cast<const uint8_t*>(a.weight_rows);
  if (a.n_act == 1) {
    if constexpr (I::kWide512) {
      x8_one_token_512<I, F>(a, n_super, group);
    } else {
      x8_one_token<I, F>(a, n_super, group);
    }
    return;
  }
  if constexpr (!I::kI16Pairs) {
    if (a.n_act < kFewTokens) {
      if constexpr (I::kWide512 && F::kSub16) {
        token_groups(a.n_act, [&]<int T>(int64_t j) { x8_few_tokens_512<I, F, T>(a, n_super, group, j); });
      } else {
        token_groups(a.n_act, [&]<int T>(int64_t j) { x8_few_tokens<I, F, T>(a, n_super, group, j); });
      }
      return;
    }
  } else {
    if (a.n_act < kFewTokensPairs) {
      token_groups(a.n_act, [&]<int T>(int64_t j) { x8_few_tokens_pairs<I, F, T>(a, n_super, group, j); });
      return;
    }
  }
  constexpr int64_t kRunBytes = kTileRows * sizeof(typename F::Block);
  if (a.n_act >= kDecodeAllTokens<I>) {
    // Many tokens: every super-block decoded first, then tile()'s token loop with each token
    // group's sums in registers across the whole row.
    std::vector<Packed<I>> packed(static_cast<size_t>(n_super));  // 2.9 KiB per super-block
    for (int64_t b = 0; b < n_super; ++b) decode_run<I, F>(group + b * kRunBytes, packed[static_cast<size_t>(b)]);
    packed_tokens<I, F>(a, n_super, packed.data());
    return;
  }
  Packed<I> P;
  for (int64_t b = 0; b < n_super; ++b) {
    const uint8_t* run = group + b * kRunBytes;
    prefetch_ahead<F>(run);  // as the one-token kernels: the weights arrive while the tokens' products run
    decode_run<I, F>(run, P);
    token_groups(a.n_act, [&]<int T>(int64_t j) { x8_block_tokens<I, F, T>(a, P, b, j); });
  }
}

// The tile kernel on kTileRows rows of the file's layout: packed per call (a transpose of
// the rows' unpacked codes), then every token group over them.
template <class I, class F>
void tile(const TileDotArgs& a) {
  const int64_t n_super = a.n / kQK_K;
  std::vector<Packed<I>> packed(static_cast<size_t>(n_super));  // 2.9 KiB per super-block
  pack_rows<I, F>(a, n_super, packed.data());
  packed_tokens<I, F>(a, n_super, packed.data());
}

}  // namespace
}  // namespace moetier::cpu::dot::kquant_tile
