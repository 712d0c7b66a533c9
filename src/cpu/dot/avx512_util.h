// Helpers shared by the cpu/dot/*_avx512.cpp kernels (only included by files compiled
// with -mavx512f -mavx512bw -mavx512vl -mavx512vnni and -ffp-contract=off, see
// CMakeLists.txt: float expressions there are evaluated exactly as written, so a kernel
// that does the scalar reference's float expression per block stays bit-identical to it).
//
// Shape of the integer kernels: for up to 4 (weight block, activation block) pairs, a
// kernel forms one __m512i of int32 partial sums per pair, then sum4_i32 turns the four
// registers into one __m128i whose lane p is pair p's exact block sum. The multi-row
// kernels put the 4 activation rows of one block in the lanes (so the float expression
// runs once for all rows, lane-wise identical to the scalar one); the single-row kernels
// put 4 consecutive blocks in the lanes and then add the per-block terms in block order.
// The Q8_0 / Q4_0 drivers (32-element blocks, two per register) do the same with 8 blocks
// per step for one row and 16 (block, row) pairs per step for several rows.
#pragma once

// GCC 12's AVX-512 headers build "undefined" registers by self-initialisation (__Y = __Y),
// which -Wall's -Winit-self/-Wuninitialized report at every inlined use; the pragma is in
// force where the header's lines are, so it silences only those.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/dot.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot::avx512 {

// Exact lane sums of four int32 registers whose 128-bit lanes 0,1 belong to sum 0 and
// lanes 2,3 to sum 1 (t01), and likewise sums 2, 3 (t23). Lane p of the result is sum p.
inline __m128i sum4_i32_halves(__m512i t01, __m512i t23) {
  // 128-bit lane p of u: four partials of sum p.
  const __m512i u = _mm512_add_epi32(_mm512_shuffle_i64x2(t01, t23, 0x88), _mm512_shuffle_i64x2(t01, t23, 0xDD));
  __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
  return _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

// Lane p of the result = Σ of the 16 int32 lanes of r_p (exact when every partial fits).
inline __m128i sum4_i32(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
  const __m512i t01 = _mm512_add_epi32(_mm512_shuffle_i64x2(r0, r1, 0x44), _mm512_shuffle_i64x2(r0, r1, 0xEE));
  const __m512i t23 = _mm512_add_epi32(_mm512_shuffle_i64x2(r2, r3, 0x44), _mm512_shuffle_i64x2(r2, r3, 0xEE));
  return sum4_i32_halves(t01, t23);
}

// Two 256-bit halves as one register (lo in lanes 0,1).
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline float fp16_scalar(fp16_t h) { return _cvtsh_ss(h); }  // exact (F16C), as fp16_to_f32

// Four fp16 values as floats (exact conversion).
inline __m128 fp16x4(fp16_t h0, fp16_t h1, fp16_t h2, fp16_t h3) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(h0), static_cast<short>(h1), static_cast<short>(h2),
                                     static_cast<short>(h3), 0, 0, 0, 0));
}

// Eight fp16 values in one register, built from registers (a store of eight halves and a
// 16-byte reload would stall on store forwarding).
inline __m128i fp16x8(const uint16_t h[8]) {
  return _mm_setr_epi16(static_cast<short>(h[0]), static_cast<short>(h[1]), static_cast<short>(h[2]),
                        static_cast<short>(h[3]), static_cast<short>(h[4]), static_cast<short>(h[5]),
                        static_cast<short>(h[6]), static_cast<short>(h[7]));
}

// Activation row j of a multi-row call, as a typed block pointer.
template <typename Block>
inline const Block* act_row(const void* rows, int64_t stride, int j) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + j * stride);
}

// Adds the lanes of `terms` (the per-block float terms of 4 consecutive blocks, `count`
// of them valid) to sum in block order, as the scalar reference's loop does.
inline float add_in_order(float sum, __m128 terms, int count) {
  alignas(16) float t[4];
  _mm_store_ps(t, terms);
  for (int k = 0; k < count; ++k) sum += t[k];
  return sum;
}

// Stores lanes 0..n-1.
inline void store_lanes(float* out, __m128 v, int n) {
  alignas(16) float t[4];
  _mm_store_ps(t, v);
  for (int j = 0; j < n; ++j) out[j] = t[j];
}

// ---- Q4_K / Q5_K: the 12-byte packing of eight 6-bit scales and mins ----

// int16 index tables for _mm512_permutexvar_epi16.
struct alignas(64) Index16 {
  int16_t v[32];
};

// kPairScale[k]: lanes 0..15 pick element 2k, lanes 16..31 element 2k + 1 (the scale of a
// register holding sub-blocks 2k and 2k + 1 as 32 int16 pairs sums each).
inline constexpr Index16 make_pair_index(int k) {
  Index16 r{};
  for (int l = 0; l < 32; ++l) r.v[l] = static_cast<int16_t>(2 * k + l / 16);
  return r;
}
inline constexpr Index16 kPairScale[4] = {make_pair_index(0), make_pair_index(1), make_pair_index(2),
                                          make_pair_index(3)};

inline __m512i load_index(const Index16& idx) { return _mm512_load_si512(idx.v); }

// Unpacked scales and mins of one Q4_K / Q5_K super-block.
struct KScales {
  __m512i scale[4];  // scale[k]: int16 lanes 0..15 = sc[2k], 16..31 = sc[2k+1]
  __m256i mins;      // int16 lane l = m[l / 2]: _mm256_madd_epi16 with the 16 bsums gives m_j·Σq_a
};

inline KScales unpack_k_scales(const uint8_t packed[kKScaleSize]) {
  uint32_t u[3];
  std::memcpy(u, packed, sizeof(u));
  // Four 6-bit values per uint32, one per byte (see tensor/blocks.h for the packing).
  const uint32_t sc_lo = u[0] & 0x3F3F3F3Fu;
  const uint32_t m_lo = u[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 2) & 0x30303030u);
  // int16 lanes 0..7 = sc[0..7], 8..15 = m[0..7].
  const __m256i v = _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi),
                                                        static_cast<int>(m_lo), static_cast<int>(m_hi)));
  const __m512i v512 = _mm512_castsi256_si512(v);
  KScales s;
  for (int k = 0; k < 4; ++k) s.scale[k] = _mm512_permutexvar_epi16(load_index(kPairScale[k]), v512);
  // m[j] in int16 lanes 2j and 2j + 1.
  const __m256i m_idx = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  s.mins = _mm256_permutexvar_epi16(m_idx, v);
  return s;
}

inline __m256i load_bsums(const BlockQ8_K& y) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
}

// What Q4_K and Q5_K share once their codes are unpacked: 4 registers of (sub-block 2k |
// 2k + 1) codes, the 6-bit scales and mins, and how they meet a Q8_K block. The family
// structs derive from this and add `unpack`.
struct KQuantScaleMinFamily {
  static constexpr bool kHasMins = true;
  struct Unpacked {
    __m512i q[4];  // q[k]: bytes 0..31 = codes of sub-block 2k, 32..63 = sub-block 2k + 1
    KScales s;
    float d, dmin;
  };
  // int32 lanes of Σ_j sc_j·(q_w·q_a)_j (8 lanes per sub-block pair).
  static __m512i lanes(const Unpacked& u, const BlockQ8_K& y) {
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m512i act = _mm512_loadu_si512(y.qs + 64 * k);
      acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u.q[k], act), u.s.scale[k]);
    }
    return acc;
  }
  // int32 lanes of Σ_j m_j·(Σ q_a)_j.
  static __m256i min_lanes(const Unpacked& u, const BlockQ8_K& y) {
    return _mm256_madd_epi16(load_bsums(y), u.s.mins);
  }
};

// ---- Drivers of the super-block families (Q4_K, Q5_K, Q6_K, IQ4_XS against Q8_K) ----
//
// A family F provides:
//   using WBlock;                      the weight block type
//   struct Unpacked { ...; float d; }  the weight side of one block, shared by all rows
//   static Unpacked unpack(const WBlock&);
//   static __m512i lanes(const Unpacked&, const BlockQ8_K&);
//       int32 lanes whose sum is the block's exact Σ_j sc_j·(q_w·q_a)_j ("scaled")
//   static constexpr bool kHasMins;    Q4_K / Q5_K: also
//   static __m256i min_lanes(const Unpacked&, const BlockQ8_K&);   lanes of Σ_j m_j·(Σq_a)_j
//   (Unpacked::dmin when kHasMins).
// The per-block float term is the scalar reference's, lane-wise:
//   d_w·d_a·(float)scaled [ − dmin_w·d_a·(float)mins ].

template <typename F>
inline __m128 kquant_terms(__m128 d, __m128 dmin, __m128 da, __m128i scaled, __m128i mins) {
  const __m128 t = _mm_mul_ps(_mm_mul_ps(d, da), _mm_cvtepi32_ps(scaled));
  if constexpr (F::kHasMins) {
    return _mm_sub_ps(t, _mm_mul_ps(_mm_mul_ps(dmin, da), _mm_cvtepi32_ps(mins)));
  } else {
    return t;
  }
}

// One activation row: 4 consecutive blocks per step, lanes = blocks.
template <typename F>
float kquant_single(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const typename F::WBlock*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int64_t n_blocks = n / kQK_K;
  float sum = 0;
  for (int64_t b = 0; b < n_blocks; b += 4) {
    const int count = n_blocks - b < 4 ? static_cast<int>(n_blocks - b) : 4;
    __m512i acc[4];
    __m256i mins[4];
    float d[4] = {0, 0, 0, 0}, dmin[4] = {0, 0, 0, 0}, da[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      acc[p] = _mm512_setzero_si512();
      mins[p] = _mm256_setzero_si256();
      if (p < count) {
        const typename F::Unpacked u = F::unpack(x[b + p]);
        acc[p] = F::lanes(u, y[b + p]);
        d[p] = u.d;
        if constexpr (F::kHasMins) {
          mins[p] = F::min_lanes(u, y[b + p]);
          dmin[p] = u.dmin;
        }
        da[p] = y[b + p].d;
      }
    }
    const __m128i scaled = sum4_i32(acc[0], acc[1], acc[2], acc[3]);
    __m128i min_sums = _mm_setzero_si128();
    if constexpr (F::kHasMins) min_sums = sum4_i32_halves(join256(mins[0], mins[1]), join256(mins[2], mins[3]));
    const __m128 terms =
        kquant_terms<F>(_mm_setr_ps(d[0], d[1], d[2], d[3]), _mm_setr_ps(dmin[0], dmin[1], dmin[2], dmin[3]),
                        _mm_setr_ps(da[0], da[1], da[2], da[3]), scaled, min_sums);
    sum = add_in_order(sum, terms, count);
  }
  return sum;
}

// NR activation rows: lanes = rows; the weight block is unpacked once per block.
template <typename F, int NR>
void kquant_multi_rows(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
  const auto* x = static_cast<const typename F::WBlock*>(w);
  const BlockQ8_K* y[4];
  for (int j = 0; j < 4; ++j) y[j] = act_row<BlockQ8_K>(a, stride, j < NR ? j : 0);
  const int64_t n_blocks = n / kQK_K;
  __m128 sum = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const typename F::Unpacked u = F::unpack(x[b]);
    __m512i acc[4];
    __m256i mins[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      acc[j] = j < NR ? F::lanes(u, y[j][b]) : _mm512_setzero_si512();
      if constexpr (F::kHasMins) mins[j] = j < NR ? F::min_lanes(u, y[j][b]) : _mm256_setzero_si256();
    }
    const __m128i scaled = sum4_i32(acc[0], acc[1], acc[2], acc[3]);
    __m128i min_sums = _mm_setzero_si128();
    if constexpr (F::kHasMins) min_sums = sum4_i32_halves(join256(mins[0], mins[1]), join256(mins[2], mins[3]));
    const __m128 da = _mm_setr_ps(y[0][b].d, NR > 1 ? y[1][b].d : 0.0f, NR > 2 ? y[2][b].d : 0.0f,
                                  NR > 3 ? y[3][b].d : 0.0f);
    float dmin = 0;
    if constexpr (F::kHasMins) dmin = u.dmin;
    sum = _mm_add_ps(sum, kquant_terms<F>(_mm_set1_ps(u.d), _mm_set1_ps(dmin), da, scaled, min_sums));
  }
  store_lanes(out, sum, NR);
}

template <typename F>
void kquant_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  switch (n_act) {
    case 1: out[0] = kquant_single<F>(n, w, a); break;
    case 2: kquant_multi_rows<F, 2>(n, w, a, stride, out); break;
    case 3: kquant_multi_rows<F, 3>(n, w, a, stride, out); break;
    default: kquant_multi_rows<F, 4>(n, w, a, stride, out); break;
  }
}

// ---- fp16 block scales without a gather ----
//
// A vpgatherdd of 16 lanes costs about as much as a whole wide step's integer work on Zen 4,
// and building a vector from 16 scalar fp16 loads is little better. Blocks are small and
// contiguous, so one unaligned 64-byte load holds the leading fp16 `d` of several consecutive
// blocks (2 for Q8_0's 34-byte blocks, 4 for Q4_0's 18-byte ones), and vpermt2w moves the
// words of two such loads into place. The conversions and products are then the same
// fp16 → float conversions and float products as the scalar code's.

struct alignas(64) WordIndex {
  int16_t v[32];
};

// Loads of 64 bytes that start at block 0, kPerLoad, 2·kPerLoad, .. of Block each hold the d
// of kPerLoad consecutive blocks (d is the block's first field).
template <typename Block>
struct ScaleLoads {
  static_assert(offsetof(Block, d) == 0 && sizeof(Block) % 2 == 0);
  static constexpr int kPerLoad = static_cast<int>((64 - sizeof(fp16_t)) / sizeof(Block)) + 1;
  // Word of block k (0 ≤ k < kPerLoad) in its load.
  static constexpr int word(int k) { return k * static_cast<int>(sizeof(Block)) / 2; }
  // A load reads no further than its kPerLoad blocks' bytes, so loads over a run of whole
  // groups of kPerLoad blocks stay inside that run.
  static_assert(kPerLoad * sizeof(Block) >= 64);
};

inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }

// ---- Drivers of the 32-element block families (Q8_0, Q4_0 against Q8_0 activations) ----
//
// A family F provides `using WBlock;` and `static __m256i codes(const WBlock&)`: the block's
// 32 signed codes in element order. Two blocks share one register. vpdpbusd needs an
// unsigned operand: |q_w| (≤ 128, as an unsigned byte, exact even for −128) meets q_a with
// q_w's sign (a masked negation), exact because Q8_0 activations are in [−127, 127]: the
// Q8_0 quantizer never writes −128 (an activation row with a −128 code would be negated
// to −128 where q_w < 0; the AVX2 kernel has the same precondition).
// Integer ranges: each vpdpbusd lane adds 4 products ≤ 128·127, so ≤ 65024; a block sum is
// ≤ 32·128·127 = 520192 < 2^31.
// Per block the float work is the scalar's: sum += (float)isum · (d_w · d_a), in block order.

// Exact sums of 8 blocks from four registers r_p holding two blocks each (int32 lanes
// 0..7: block A of r_p, 8..15: block B). Before reordering, sum 2p is r_p's block A and
// 2p + 1 its block B; `order` (8 int32 indices into 0, 4, .., 28 = those sums) picks the
// result's lanes.
inline __m256i sum8_i32(__m512i r0, __m512i r1, __m512i r2, __m512i r3, __m512i order) {
  // 128-bit lanes of t01: r0 A, r0 B, r1 A, r1 B (four partials each).
  const __m512i t01 = _mm512_add_epi32(_mm512_shuffle_i64x2(r0, r1, 0x88), _mm512_shuffle_i64x2(r0, r1, 0xDD));
  const __m512i t23 = _mm512_add_epi32(_mm512_shuffle_i64x2(r2, r3, 0x88), _mm512_shuffle_i64x2(r2, r3, 0xDD));
  __m512i v01 = _mm512_add_epi32(t01, _mm512_shuffle_epi32(t01, _MM_PERM_BADC));
  v01 = _mm512_add_epi32(v01, _mm512_shuffle_epi32(v01, _MM_PERM_CDAB));
  __m512i v23 = _mm512_add_epi32(t23, _mm512_shuffle_epi32(t23, _MM_PERM_BADC));
  v23 = _mm512_add_epi32(v23, _mm512_shuffle_epi32(v23, _MM_PERM_CDAB));
  return _mm512_castsi512_si256(_mm512_permutex2var_epi32(v01, order, v23));
}

// int32 lanes of Σ q_w·q_a for the 64 codes of two blocks (see above for the sign trick).
inline __m512i q8_pair_lanes(__m512i w_abs, __mmask64 w_negative, __m512i act) {
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_dpbusd_epi32(zero, w_abs, _mm512_mask_sub_epi8(act, w_negative, zero, act));
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Up to 8 consecutive blocks (count of them valid) of one row; adds their terms to sum.
template <typename F, bool kFull>
inline float q8_0_family_chunk(const typename F::WBlock* x, const BlockQ8_0* y, int count, float sum) {
  __m512i acc[4];
  uint16_t dw[8] = {0, 0, 0, 0, 0, 0, 0, 0}, da[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    __m256i w[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i act[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int h = 0; h < 2; ++h) {
      const int k = 2 * p + h;
      if (kFull || k < count) {
        w[h] = F::codes(x[k]);
        act[h] = load32(y[k].qs);
        dw[k] = x[k].d;
        da[k] = y[k].d;
      }
    }
    const __m512i wv = join256(w[0], w[1]);
    acc[p] = q8_pair_lanes(_mm512_abs_epi8(wv), _mm512_movepi8_mask(wv), join256(act[0], act[1]));
  }
  const __m256i sums = sum8_i32(acc[0], acc[1], acc[2], acc[3],
                                _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(fp16x8(dw)), _mm256_cvtph_ps(fp16x8(da)));
  alignas(32) float terms[8];
  _mm256_store_ps(terms, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale));
  const int valid = kFull ? 8 : count;
  for (int k = 0; k < valid; ++k) sum += terms[k];
  return sum;
}

template <typename F>
float q8_0_family_single(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const typename F::WBlock*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t n_blocks = n / kQK8_0;
  float sum = 0;
  int64_t b = 0;
  for (; b + 8 <= n_blocks; b += 8) sum = q8_0_family_chunk<F, true>(x + b, y + b, 8, sum);
  if (b < n_blocks) sum = q8_0_family_chunk<F, false>(x + b, y + b, static_cast<int>(n_blocks - b), sum);
  return sum;
}

// Exact sums of 16 (slot, block) pairs: acc[s][h] holds slot s's blocks 2h (int32 lanes
// 0..7) and 2h + 1 (lanes 8..15). Before the caller's reordering, (slot s, block k) sits in
// int32 lane 4·L + e with L = 2·(s % 2) + k % 2 and e = 2·(k / 2) + s / 2.
inline __m512i sum16_i32_unordered(const __m512i acc[4][2]) {
  const auto pair_slots = [](__m512i sa, __m512i sb) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(sa, sb, 0x88), _mm512_shuffle_i64x2(sa, sb, 0xDD));
  };
  // 128-bit lanes, four partials each: t0: (s0 k0) (s0 k1) (s1 k0) (s1 k1); t1: slots 2, 3;
  // t2, t3: the same for blocks 2, 3.
  const __m512i t0 = pair_slots(acc[0][0], acc[1][0]);
  const __m512i t1 = pair_slots(acc[2][0], acc[3][0]);
  const __m512i t2 = pair_slots(acc[0][1], acc[1][1]);
  const __m512i t3 = pair_slots(acc[2][1], acc[3][1]);
  // 4×4 transposing sum inside each 128-bit lane L: element e = Σ of t_e's lane L.
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(t2, t3), _mm512_unpackhi_epi32(t2, t3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// Lane tables of the wide multi-row step (see q8_0_family_multi_rows). kRows rows per
// block (4, or 2 with 8 blocks per step): result lane ℓ = kRows·block + row.
template <int kRows>
struct WideStep {
  static constexpr int kBlocks = 16 / kRows;
  struct alignas(64) Table {
    int32_t v[16];
  };
  // ℓ → position in sum16_i32_unordered's output: block = 4g + k, slot = kRows·g + row.
  static constexpr Table order() {
    Table t{};
    for (int l = 0; l < 16; ++l) {
      const int block = l / kRows, row = l % kRows;
      const int g = block / 4, k = block % 4, slot = kRows * g + row;
      t.v[l] = 4 * (2 * (slot % 2) + k % 2) + 2 * (k / 2) + slot / 2;
    }
    return t;
  }
  static constexpr Table kOrder = order();
};

// The fp16 scales of a wide step in its lane order ℓ = kRows·block + row, for weight blocks
// of type WBlock and Q8_0 activation blocks. Sources are 64-byte loads (ScaleLoads): the
// weight loads j = 0, 1, .. (blocks j·kPerLoad ..), and for the activations, source
// s = row·kActLoads + j. vpermt2w takes two sources at a time; their results are merged by
// word blends (lanes ≥ 16 are unused).
template <typename WBlock, int kRows>
struct WideScales {
  static constexpr int kBlocks = WideStep<kRows>::kBlocks;
  using W = ScaleLoads<WBlock>;
  using A = ScaleLoads<BlockQ8_0>;
  static_assert(kBlocks % W::kPerLoad == 0 && kBlocks % A::kPerLoad == 0);
  static constexpr int kWLoads = kBlocks / W::kPerLoad;
  static constexpr int kActLoads = kBlocks / A::kPerLoad;
  static constexpr int kActPairs = kRows * kActLoads / 2;
  static_assert((kRows * kActLoads) % 2 == 0 && (kWLoads == 1 || kWLoads % 2 == 0));
  static constexpr int act_source(int l) { return (l % kRows) * kActLoads + (l / kRows) / A::kPerLoad; }
  static constexpr int w_source(int l) { return (l / kRows) / W::kPerLoad; }
  // vpermt2w index: bit 5 picks the second source of the pair.
  static constexpr WordIndex act_index() {
    WordIndex t{};
    for (int l = 0; l < 16; ++l) {
      t.v[l] = static_cast<int16_t>(32 * (act_source(l) % 2) + A::word((l / kRows) % A::kPerLoad));
    }
    return t;
  }
  static constexpr WordIndex w_index() {
    WordIndex t{};
    for (int l = 0; l < 16; ++l) {
      t.v[l] = static_cast<int16_t>(32 * (w_source(l) % 2) + W::word((l / kRows) % W::kPerLoad));
    }
    return t;
  }
  static constexpr __mmask32 act_pair_lanes(int p) {
    __mmask32 m = 0;
    for (int l = 0; l < 16; ++l) m |= (act_source(l) / 2 == p ? 1u : 0u) << l;
    return m;
  }
  static constexpr __mmask32 w_pair_lanes(int p) {
    __mmask32 m = 0;
    for (int l = 0; l < 16; ++l) m |= (w_source(l) / 2 == p ? 1u : 0u) << l;
    return m;
  }
  static constexpr WordIndex kActIndex = act_index();
  static constexpr WordIndex kWIndex = w_index();

  // d_w · d_a per lane for the step starting at weight block x[0] and activation blocks y[j][0].
  static __m512 products(const WBlock* x, const BlockQ8_0* const y[4], __m512i act_idx, __m512i w_idx) {
    __m512i da = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < kActPairs; ++p) {
      const int s0 = 2 * p, s1 = 2 * p + 1;
      const __m512i v =
          _mm512_permutex2var_epi16(load64(y[s0 / kActLoads] + A::kPerLoad * (s0 % kActLoads)), act_idx,
                                    load64(y[s1 / kActLoads] + A::kPerLoad * (s1 % kActLoads)));
      da = p == 0 ? v : _mm512_mask_blend_epi16(act_pair_lanes(p), da, v);
    }
    __m512i dw = _mm512_setzero_si512();
    if constexpr (kWLoads == 1) {
      dw = _mm512_permutexvar_epi16(w_idx, load64(x));
    } else {
#pragma GCC unroll 2
      for (int p = 0; p < kWLoads / 2; ++p) {
        const __m512i v = _mm512_permutex2var_epi16(load64(x + W::kPerLoad * 2 * p), w_idx,
                                                    load64(x + W::kPerLoad * (2 * p + 1)));
        dw = p == 0 ? v : _mm512_mask_blend_epi16(w_pair_lanes(p), dw, v);
      }
    }
    return _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dw)),
                         _mm512_cvtph_ps(_mm512_castsi512_si256(da)));
  }
};

// NR rows; lanes of the float work = rows. Wide steps of 16 (block, row) pairs (4 blocks
// × 4 rows, or 8 blocks × 2 rows when NR = 2) whose int32 sums are reduced together and
// whose fp16 scales come from a few 64-byte loads (WideScales); then two blocks per step
// for the rest.
template <typename F, int NR>
void q8_0_family_multi_rows(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
  constexpr int kRows = NR == 2 ? 2 : 4;
  using Step = WideStep<kRows>;
  constexpr int kBlocks = Step::kBlocks;
  const auto* x = static_cast<const typename F::WBlock*>(w);
  const BlockQ8_0* y[4];
  for (int j = 0; j < 4; ++j) y[j] = act_row<BlockQ8_0>(a, stride, j < NR ? j : 0);
  const int64_t n_blocks = n / kQK8_0;
  __m128 sum = _mm_setzero_ps();
  int64_t b = 0;
  // Rows ≥ NR read row 0 (y above); their lanes are never stored.
  using Scales = WideScales<typename F::WBlock, kRows>;
  const __m512i act_idx = _mm512_load_si512(Scales::kActIndex.v);
  const __m512i w_idx = _mm512_load_si512(Scales::kWIndex.v);
  const __m512i order = _mm512_load_si512(Step::kOrder.v);
  for (; b + kBlocks <= n_blocks; b += kBlocks) {
    __m512i acc[4][2];
#pragma GCC unroll 2
    for (int g = 0; g < kBlocks / 4; ++g) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t k = b + 4 * g + 2 * h;
        const __m512i wv = join256(F::codes(x[k]), F::codes(x[k + 1]));
        const __m512i w_abs = _mm512_abs_epi8(wv);
        const __mmask64 w_negative = _mm512_movepi8_mask(wv);
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r) {
          acc[kRows * g + r][h] = r < NR ? q8_pair_lanes(w_abs, w_negative,
                                                         join256(load32(y[r][k].qs), load32(y[r][k + 1].qs)))
                                         : _mm512_setzero_si512();
        }
      }
    }
    const __m512i sums = _mm512_permutexvar_epi32(order, sum16_i32_unordered(acc));
    const BlockQ8_0* const y_step[4] = {y[0] + b, y[1] + b, y[2] + b, y[3] + b};
    const __m512 scale = Scales::products(x + b, y_step, act_idx, w_idx);
    const __m512 terms = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), scale);
    // Per block in order: its kRows lanes are added to lanes 0..kRows-1 of sum (other lanes
    // of sum collect unused values and are never stored).
    const __m128 t[4] = {_mm512_castps512_ps128(terms), _mm512_extractf32x4_ps(terms, 1),
                         _mm512_extractf32x4_ps(terms, 2), _mm512_extractf32x4_ps(terms, 3)};
    for (int q = 0; q < 4; ++q) {
      sum = _mm_add_ps(sum, t[q]);
      if constexpr (kRows == 2) sum = _mm_add_ps(sum, _mm_movehl_ps(t[q], t[q]));
    }
  }
  // Result lanes 0..3: rows 0..3 of block A; 4..7: rows 0..3 of block B.
  const __m512i tail_order = _mm512_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28, 0, 0, 0, 0, 0, 0, 0, 0);
  for (; b < n_blocks; b += 2) {
    const bool two = b + 1 < n_blocks;
    const __m512i wv = join256(F::codes(x[b]), two ? F::codes(x[b + 1]) : _mm256_setzero_si256());
    const __m512i w_abs = _mm512_abs_epi8(wv);
    const __mmask64 w_negative = _mm512_movepi8_mask(wv);
    __m512i acc[4];
    uint16_t dw[8] = {x[b].d, x[b].d, x[b].d, x[b].d, 0, 0, 0, 0}, da[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (two) dw[4] = dw[5] = dw[6] = dw[7] = x[b + 1].d;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm512_setzero_si512();
      if (j < NR) {
        const __m256i act_b = load32(y[j][b].qs);
        const __m256i act_b1 = two ? load32(y[j][b + 1].qs) : _mm256_setzero_si256();
        acc[j] = q8_pair_lanes(w_abs, w_negative, join256(act_b, act_b1));
        da[j] = y[j][b].d;
        if (two) da[4 + j] = y[j][b + 1].d;
      }
    }
    const __m256i sums = sum8_i32(acc[0], acc[1], acc[2], acc[3], tail_order);
    const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(fp16x8(dw)), _mm256_cvtph_ps(fp16x8(da)));
    const __m256 terms = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale);
    sum = _mm_add_ps(sum, _mm256_castps256_ps128(terms));
    if (two) sum = _mm_add_ps(sum, _mm256_extractf128_ps(terms, 1));
  }
  store_lanes(out, sum, NR);
}

template <typename F>
void q8_0_family_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  switch (n_act) {
    case 1: out[0] = q8_0_family_single<F>(n, w, a); break;
    case 2: q8_0_family_multi_rows<F, 2>(n, w, a, stride, out); break;
    case 3: q8_0_family_multi_rows<F, 3>(n, w, a, stride, out); break;
    default: q8_0_family_multi_rows<F, 4>(n, w, a, stride, out); break;
  }
}

}  // namespace moetier::cpu::dot::avx512
