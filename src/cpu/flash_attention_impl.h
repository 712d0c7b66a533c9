// The flash-attention kernels' code (the arithmetic: docs/numerics.md, "Flash attention"), included by
// flash_attention.cpp (base ISA), flash_attention_avx2.cpp, flash_attention_avxvnni.cpp and
// flash_attention_avx512.cpp, which compile it with their ISA's flags. Written with GCC
// vector extensions of the unit's native width over a fixed lane layout (the dot products'
// 16 float lanes; everything else element-wise); fused multiply-adds are explicit (fmadd)
// and the units are compiled without FMA contraction, so the variants are bit-identical.
// Everything here has internal linkage: each unit keeps its own copy, compiled for its own
// ISA. The loops over a register block's vectors, keys and pieces carry
// `#pragma GCC unroll`: in run_part's nest of lambdas GCC's size heuristics otherwise leave
// some of them rolled, with the accumulators in memory (half the speed of a decode).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/math.h"
#include "cpu/flash_attention.h"
#include "cpu/ops.h"
#include "cpu/simd.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/activation_quant.h"

#if defined(__F16C__) || defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace moetier::cpu::flash {
namespace {

#define MOETIER_FA_INLINE MOETIER_SIMD_INLINE

// The lanes the arithmetic is defined on (16 float lanes per dot product; everything else is
// element-wise) are spread over as many native vectors (cpu/simd.h) as needed, so every ISA
// computes the same lane values in the same order.
using simd::kF;
using simd::kVecBytes;
using simd::exp_f32_lanes;
using simd::load;
using simd::store;
using simd::VF;
using simd::VI;

constexpr int64_t kTile = kFlashKeyTile;
// Query vectors per register block (scores and P·V): 8 with AVX-512's 32 registers, 4 else.
constexpr int kBlock = kVecBytes == 64 ? 8 : 4;

// Native vector of K/V elements as floats: f32 read in place, f16 converted in registers
// (exact, the same value as fp16_to_f32), so the two give the same arithmetic.
MOETIER_FA_INLINE VF load_f(const float* p) { return load<VF>(p); }
MOETIER_FA_INLINE VF load_f(const uint16_t* p) {
#if defined(__AVX512F__)
  // (maskz with every lane set: the plain conversion, without the header's undefined source.)
  return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  VF r;
  for (int i = 0; i < kF; ++i) r[i] = fp16_to_f32(p[i]);
  return r;
#endif
}

// An f16 scale as a float (exact, the value of fp16_to_f32; F16C in a register where the
// unit has it, instead of a call per block).
MOETIER_FA_INLINE float f16_scale(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return fp16_to_f32(h);
#endif
}

// kF values of a Q8_0 row from element col (a multiple of kF, so inside one block) as
// floats: code · d, one exact product (8-bit code × 11-bit scale), the value
// dequantize_row_q8_0 and tile_rows give.
MOETIER_FA_INLINE VF load_q8(const BlockQ8_0* row, int64_t col) {
  const BlockQ8_0& b = row[col / kQK8_0];
  const int8_t* qs = b.qs + col % kQK8_0;
#if defined(__AVX512F__)
  // (maskz with every lane set: the plain widening, without the header's undefined source.)
  const VI codes = reinterpret_cast<VI>(
      _mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(0xFFFF), _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))));
#elif defined(__AVX2__)
  const VI codes = reinterpret_cast<VI>(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs))));
#else
  VI codes;
  for (int i = 0; i < kF; ++i) codes[i] = qs[i];
#endif
  const VF x = __builtin_convertvector(codes, VF);
  return x * (f16_scale(b.d) - VF{});
}

// x in every lane. (x − 0 is x for every x, −0 included, so GCC folds the subtraction and
// emits a plain broadcast; VF{} + x would have to keep an add, since −0 + 0 = +0.)
MOETIER_FA_INLINE VF splat(float x) { return x - VF{}; }

// a·b + c rounded once, lane-wise: the FMA unit in the AVX2 and AVX-512 builds, math::fma_f32
// (also one rounding, in code: C libraries' fmaf are not all correctly rounded) in the base
// build, so every build on every OS gives the same bits.
MOETIER_FA_INLINE VF fmadd(VF a, VF b, VF c) {
#if defined(__FMA__) && defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  VF r;
  for (int i = 0; i < kF; ++i) r[i] = math::fma_f32(a[i], b[i], c[i]);
  return r;
#endif
}

// e^x lane-wise for x ≤ 0: math::exp_f32's arithmetic (x = n·ln2 + r, |r| ≤ ln2/2, its
// polynomial for e^r, 2^n from the exponent bits), so a lane's value is
// exp_f32(x) for x ≥ −87. Lanes below −87 (and −inf) give 0: e^−87 < 2^−125, below float
// resolution next to the row max's weight 1. e^0 is exactly 1.
MOETIER_FA_INLINE VF exp_nonpositive(VF x) {
  const VF y = exp_f32_lanes<VF, VI>(x);
  return x < -87.0f ? VF{} : y;
}
MOETIER_FA_INLINE float exp_nonpositive(float x) { return exp_nonpositive(splat(x))[0]; }

// The 16 float lanes a[0..15] of a dot product (kPieces native vectors) summed by halving:
// t_l = a_l + a_(l+8), then t_l + t_(l+4), then + t_(l+2), then lane 0 + lane 1.
constexpr int kDotLanes = 16;
constexpr int kPieces = kDotLanes / kF;
MOETIER_FA_INLINE float hsum(const VF (&a)[kPieces]) {
  using V4 = float __attribute__((vector_size(16)));
#if defined(__AVX__)
  using V8 = float __attribute__((vector_size(32)));
#endif
#if defined(__AVX512F__)
  const V8 t8 = __builtin_shufflevector(a[0], a[0], 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(a[0], a[0], 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 t4 = __builtin_shufflevector(t8, t8, 0, 1, 2, 3) + __builtin_shufflevector(t8, t8, 4, 5, 6, 7);
#elif defined(__AVX__)
  const V8 t8 = a[0] + a[1];
  const V4 t4 = __builtin_shufflevector(t8, t8, 0, 1, 2, 3) + __builtin_shufflevector(t8, t8, 4, 5, 6, 7);
#else
  const V4 t4 = (a[0] + a[2]) + (a[1] + a[3]);  // lanes l and l + 8, then l and l + 4
#endif
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

// The working memory of one task inside FlashScratch (offsets in its f / d arrays).
struct Layout {
  int64_t kbuf, vbuf, q, s, o_part, o_tot, m_part, m_tot, alpha;  // floats
  int64_t l_part, l_tot;                                             // doubles
  int64_t n_f, n_d;
};

// width = n_kv_heads · hd (the converted K/V tiles hold every KV head of the task).
MOETIER_FA_INLINE Layout layout(int64_t hd, int64_t width, int64_t n_vec) {
  Layout L{};
  int64_t f = 0;
  const auto take = [](int64_t& at, int64_t n) {
    const int64_t here = at;
    at += (n + 15) / 16 * 16;  // 64-byte steps
    return here;
  };
  L.kbuf = take(f, kTile * width);
  L.vbuf = take(f, kTile * width);
  L.q = take(f, n_vec * hd);
  L.s = take(f, n_vec * kTile);
  L.o_part = take(f, n_vec * hd);
  L.o_tot = take(f, n_vec * hd);
  L.m_part = take(f, n_vec);
  L.m_tot = take(f, n_vec);
  L.alpha = take(f, n_vec);
  int64_t d = 0;
  L.l_part = take(d, n_vec);
  L.l_tot = take(d, n_vec);
  L.n_f = f;
  L.n_d = d;
  return L;
}

// The bytes of the task's slice of a cache row (width elements from kv.first):
// [*first, *first + *bytes).
MOETIER_FA_INLINE void head_bytes(const KvHeadRows& kv, int64_t width, int64_t* first, int64_t* bytes) {
  switch (kv.type) {
    case DType::F32: *first = kv.first * 4, *bytes = width * 4; return;
    case DType::F16: *first = kv.first * 2, *bytes = width * 2; return;
    case DType::Q8_0: *first = kv.first / kQK8_0 * 34, *bytes = width / kQK8_0 * 34; return;
    case DType::Q4_0: *first = kv.first / kQK4_0 * 18, *bytes = width / kQK4_0 * 18; return;
    default: *first = 0, *bytes = 0; return;
  }
}

// Asks for row j of the task's slice to be brought into the cache: each row of the next
// tile is asked for while the same row of this tile is converted, so the requests are
// spread over the conversion rather than issued as one burst of a whole tile's lines.
MOETIER_FA_INLINE void prefetch_row(const KvHeadRows& kv, int64_t first_byte, int64_t bytes, int64_t j) {
  const uint8_t* row = kv.data + j * kv.row_bytes + first_byte;
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
  __builtin_prefetch(row + bytes - 1, 0, 2);
}

// Rows [j0, j0 + n) of the task's KV heads (hd = their n_kv_heads · head_dim elements from
// kv.first, contiguous in a cache row) as f32: F32 caches are read in place, other types
// are converted into buf [n][hd] (the same values as the cache type's dequantize_row).
// Returns the first row; *stride receives the distance between rows in floats. Rows
// [next0, next0 + n_next) (the next tile) are prefetched along the way.
MOETIER_FA_INLINE const float* tile_rows(const KvHeadRows& kv, int64_t hd, int64_t j0, int64_t n, float* buf,
                                         int64_t* stride, int64_t next0, int64_t n_next) {
  const uint8_t* row0 = kv.data + j0 * kv.row_bytes;
  int64_t pf_first = 0, pf_bytes = 0;
  head_bytes(kv, hd, &pf_first, &pf_bytes);
  const auto prefetch = [&](int64_t j) {
    if (j < n_next) prefetch_row(kv, pf_first, pf_bytes, next0 + j);
  };
  switch (kv.type) {
    case DType::F32:
      for (int64_t j = 0; j < n_next; ++j) prefetch(j);
      *stride = kv.row_bytes / static_cast<int64_t>(sizeof(float));
      return reinterpret_cast<const float*>(row0) + kv.first;
    case DType::F16:
      for (int64_t j = 0; j < n; ++j) {
        prefetch(j);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(row0 + j * kv.row_bytes) + kv.first;
#if defined(__F16C__)
        for (int64_t i = 0; i < hd; i += 8) {  // exact, like fp16_to_f32
          _mm256_storeu_ps(buf + j * hd + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
        }
#else
        fp16_to_f32_row(h, buf + j * hd, hd);
#endif
      }
      break;
    case DType::Q8_0:
      for (int64_t j = 0; j < n; ++j) {
        prefetch(j);
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(row0 + j * kv.row_bytes) + kv.first / kQK8_0;
        float* out = buf + j * hd;
        for (int64_t b = 0; b < hd / kQK8_0; ++b) {
          const float d = fp16_to_f32(blk[b].d);
          for (int i = 0; i < kQK8_0; ++i) out[b * kQK8_0 + i] = static_cast<float>(blk[b].qs[i]) * d;
        }
      }
      break;
    case DType::Q4_0:
      for (int64_t j = 0; j < n; ++j) {
        prefetch(j);
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(row0 + j * kv.row_bytes) + kv.first / kQK4_0;
        float* out = buf + j * hd;
        for (int64_t b = 0; b < hd / kQK4_0; ++b) {
          const float d = fp16_to_f32(blk[b].d);
          for (int i = 0; i < kQK4_0 / 2; ++i) {
            out[b * kQK4_0 + i] = static_cast<float>((blk[b].qs[i] & 0x0F) - 8) * d;
            out[b * kQK4_0 + i + kQK4_0 / 2] = static_cast<float>((blk[b].qs[i] >> 4) - 8) * d;
          }
        }
      }
      break;
    default: break;  // flash_attention_supports() rules other types out
  }
  *stride = hd;
  return buf;
}

// s[b][j] = float(Σ_i q[b][i]·k[j][i]) · scale for B query vectors (q: [B][hd]) and keys
// j < n_keys. Lane l of the 16 float lanes sums elements i ≡ l (mod 16) in order with fused
// multiply-adds, then hsum's fixed tree. The native vectors holding lanes [p·kF, (p+1)·kF)
// are independent sums, so they are computed one after the other (pass p): a pass needs
// only kKeys·B accumulators, and each loaded q and k vector feeds kKeys or B FMAs (loads,
// not FMAs, bound the inner loop otherwise). kKeys keys per pass hide the FMA latency.
// None of this changes a lane's order of operations, so no result depends on it.
// With more than 4 vectors per block (decode's whole GQA group) in 16 registers, one key per
// pass (B accumulators).
constexpr int kKeys = 2;
template <int B, class T>
MOETIER_FA_INLINE void scores(const float* q, int64_t hd, const T* k, int64_t k_stride, int64_t n_keys,
                              float scale, float* s) {
  constexpr int kKeysB = B > 4 && kVecBytes < 64 ? 1 : kKeys;
  const auto run = [&]<int K>(int64_t j) {
    VF lanes[K][B][kPieces];
    #pragma GCC unroll 16
    for (int p = 0; p < kPieces; ++p) {
      VF acc[K][B];
      #pragma GCC unroll 16
      for (int key = 0; key < K; ++key) {
        #pragma GCC unroll 16
        for (int b = 0; b < B; ++b) acc[key][b] = VF{};
      }
      for (int64_t i = p * kF; i < hd; i += kDotLanes) {
        VF kv[K];
        #pragma GCC unroll 16
        for (int key = 0; key < K; ++key) kv[key] = load_f(k + (j + key) * k_stride + i);
        #pragma GCC unroll 16
        for (int b = 0; b < B; ++b) {
          const VF qv = load<VF>(q + b * hd + i);
          #pragma GCC unroll 16
          for (int key = 0; key < K; ++key) acc[key][b] = fmadd(qv, kv[key], acc[key][b]);
        }
      }
      #pragma GCC unroll 16
      for (int key = 0; key < K; ++key) {
        #pragma GCC unroll 16
        for (int b = 0; b < B; ++b) lanes[key][b][p] = acc[key][b];
      }
    }
    #pragma GCC unroll 16
    for (int key = 0; key < K; ++key) {
      #pragma GCC unroll 16
      for (int b = 0; b < B; ++b) s[b * kTile + j + key] = hsum(lanes[key][b]) * scale;
    }
  };
  int64_t j = 0;
  for (; j + kKeysB <= n_keys; j += kKeysB) run.template operator()<kKeysB>(j);
  for (; j < n_keys; ++j) run.template operator()<1>(j);
}

// ---- Integer Q·K against a Q8_0 K cache ------------------------------------------------
// Each query vector is quantized once per item to Q8_0 blocks (quantize_row_q8_0_activations:
// the rounding of ggml's x86 backend, what llama.cpp's CPU flash attention does with q
// before its q8_0 dot), and a score is
//   s_j = fl(acc_nb · scale),  acc_0 = 0,  acc_(b+1) = fma(float(isum_jb), fl(d_k,jb · d_q,b), acc_b)
// over the blocks b in order, isum_jb = Σ_(i in block b) k_ji·c_i the exact integer sum of
// the codes. |k| ≤ 128 (a cache may hold −128), |c| ≤ 127 (the quantizer never writes −128),
// so |isum| ≤ 32·128·127 = 520192 < 2^24: float(isum) is exact. The integer sum may be formed
// in any order; the float steps are element-wise over the keys, so every ISA gives the same
// bits.
//
// Layout: the keys of a tile are repacked once per item and tile so that the 32-bit lane l
// of a native vector holds 4 consecutive codes of key j + l: words[(gb·8 + w)·kTile + j] =
// codes 4w..4w+3 of block gb of key j (gb: block within the task's KV heads' slice), dk[gb·kTile
// + j] its scale. One 4-byte word of a query's codes, broadcast, then meets kF keys at once:
// no horizontal sums. Keys past the tile's end up to a multiple of kF are zero.
//  * VNNI (AVX-512 VNNI, AVX-VNNI): VPDPBUSD takes an unsigned operand: the repacked codes
//    are u = k + 128 (k XOR 0x80, 0..255) and the sum starts at −128·Σ_(block) c, so
//    Σ u·c − 128·Σ c = Σ k·c. Intermediates: |Σ u·c| ≤ 32·255·127 = 1036320 plus
//    128·32·127 = 520192: far inside int32, and VPDPBUSD (not the saturating VPDPBUSDS)
//    wraps nothing.
//  * AVX2 without VNNI: VPMADDUBSW pairs |k| (unsigned, ≤ 128) with c carrying k's sign
//    (VPSIGNB): each pair ≤ 2·128·127 = 32512 < 32767, no saturation; VPMADDWD by 1 widens.
//  * base ISA (the scalar reference): Σ k·c per lane in int arithmetic.
#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif
constexpr uint32_t kCodeFlip = kVnni ? 0x80808080u : 0u;

// Where the quantized queries live in the scratch's q area (n_vec·hd floats; these take
// n_vec·hd·(1/4 + 2/32) of them): codes [n_vec][hd] int8, d_q [n_vec][nb] float and the
// integer sums' start values [n_vec][nb] int32 (−128·Σ c with VNNI, else 0).
struct QuantQueries {
  int8_t* codes;
  float* d;
  int32_t* init;
};
MOETIER_FA_INLINE QuantQueries quant_queries(float* area, int64_t n_vec, int64_t hd) {
  const int64_t code_floats = (n_vec * hd + 3) / 4;
  return {.codes = reinterpret_cast<int8_t*>(area),
          .d = area + code_floats,
          .init = reinterpret_cast<int32_t*>(area + code_floats + n_vec * (hd / kQK8_0))};
}

// Query vector q (hd floats) into its codes, scales and start values.
MOETIER_FA_INLINE void quantize_query(const float* q, int64_t hd, int8_t* codes, float* d, int32_t* init) {
  for (int64_t b = 0; b < hd / kQK8_0; ++b) {
    BlockQ8_0 blk;
    types::quantize_row_q8_0_activations(q + b * kQK8_0, &blk, kQK8_0);
    int32_t sum = 0;
    for (int i = 0; i < kQK8_0; ++i) sum += blk.qs[i];
    std::memcpy(codes + b * kQK8_0, blk.qs, kQK8_0);
    d[b] = f16_scale(blk.d);
    init[b] = kVnni ? -128 * sum : 0;
  }
}

// Rows [j0, j0 + n) of the task's Q8_0 K slice (width elements from kv.first) repacked into
// words / dk (see above), keys n .. round_up(n, kF) zero. Rows [next0, next0 + n_next)
// are prefetched along the way.
MOETIER_FA_INLINE void repack_keys_q8(const KvHeadRows& kv, int64_t width, int64_t j0, int64_t n, uint32_t* words,
                                      float* dk, int64_t next0, int64_t n_next) {
  const int64_t nbw = width / kQK8_0;
  const int64_t n_pad = (n + kF - 1) / kF * kF;
  int64_t pf_first = 0, pf_bytes = 0;
  head_bytes(kv, width, &pf_first, &pf_bytes);
  const auto row = [&](int64_t j) {
    return reinterpret_cast<const BlockQ8_0*>(kv.data + (j0 + j) * kv.row_bytes) + kv.first / kQK8_0;
  };
  for (int64_t j = 0; j < n_pad; ++j) {
    if (j < n_next) prefetch_row(kv, pf_first, pf_bytes, next0 + j);
    const BlockQ8_0* blk = j < n ? row(j) : nullptr;
    for (int64_t gb = 0; gb < nbw; ++gb) dk[gb * kTile + j] = blk ? f16_scale(blk[gb].d) : 0.0f;
  }
#if defined(__AVX2__)
  // 8 keys × 8 words of a block: an 8×8 transpose of 32-bit words.
  for (int64_t gb = 0; gb < nbw; ++gb) {
    for (int64_t j = 0; j < n_pad; j += 8) {
      __m256i r[8];
      for (int t = 0; t < 8; ++t) {
        r[t] = j + t < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row(j + t)[gb].qs))
                         : _mm256_setzero_si256();
      }
      const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
      const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
      const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
      const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
      const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
      const __m256i flip = _mm256_set1_epi32(static_cast<int32_t>(kCodeFlip));
      const __m256i w[8] = {_mm256_permute2x128_si256(u0, u4, 0x20), _mm256_permute2x128_si256(u1, u5, 0x20),
                            _mm256_permute2x128_si256(u2, u6, 0x20), _mm256_permute2x128_si256(u3, u7, 0x20),
                            _mm256_permute2x128_si256(u0, u4, 0x31), _mm256_permute2x128_si256(u1, u5, 0x31),
                            _mm256_permute2x128_si256(u2, u6, 0x31), _mm256_permute2x128_si256(u3, u7, 0x31)};
      for (int t = 0; t < 8; ++t) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + (gb * 8 + t) * kTile + j), _mm256_xor_si256(w[t], flip));
      }
    }
  }
#else
  for (int64_t j = 0; j < n_pad; ++j) {
    const BlockQ8_0* blk = j < n ? row(j) : nullptr;
    for (int64_t gb = 0; gb < nbw; ++gb) {
      for (int w = 0; w < 8; ++w) {
        uint32_t x = 0;
        if (blk) std::memcpy(&x, blk[gb].qs + 4 * w, 4);
        words[(gb * 8 + w) * kTile + j] = x ^ kCodeFlip;
      }
    }
  }
#endif
}

// isum + Σ of the 4 byte products per 32-bit lane: the repacked key codes k (u = k + 128
// with VNNI) against one broadcast word of query codes c. k_abs: |k| (AVX2 without VNNI).
MOETIER_FA_INLINE VI dot4(VI isum, VI k, VI k_abs, VI c) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  return reinterpret_cast<VI>(_mm512_dpbusd_epi32(reinterpret_cast<__m512i>(isum), reinterpret_cast<__m512i>(k),
                                                  reinterpret_cast<__m512i>(c)));
#elif defined(__AVXVNNI__)
  return reinterpret_cast<VI>(_mm256_dpbusd_avx_epi32(reinterpret_cast<__m256i>(isum), reinterpret_cast<__m256i>(k),
                                                      reinterpret_cast<__m256i>(c)));
#elif defined(__AVX2__)
  const __m256i sc = _mm256_sign_epi8(reinterpret_cast<__m256i>(c), reinterpret_cast<__m256i>(k));
  const __m256i pairs = _mm256_maddubs_epi16(reinterpret_cast<__m256i>(k_abs), sc);
  return isum + reinterpret_cast<VI>(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#else
  for (int l = 0; l < kF; ++l) {
    int8_t kb[4], cb[4];
    std::memcpy(kb, &k[l], 4);
    std::memcpy(cb, &c[l], 4);
    isum[l] += kb[0] * cb[0] + kb[1] * cb[1] + kb[2] * cb[2] + kb[3] * cb[3];
  }
  return isum;
#endif
}
MOETIER_FA_INLINE VI abs_codes(VI k) {
#if defined(__AVX2__) && !defined(__AVX512VNNI__) && !defined(__AVXVNNI__)
  return reinterpret_cast<VI>(_mm256_abs_epi8(reinterpret_cast<__m256i>(k)));
#else
  return k;  // unused
#endif
}

// s[b][j] for B quantized query vectors (codes c: [B][hd], d / init: [B][nb]) and keys
// j < n_keys (rounded up to kF; the repacked tile has them) of one KV head's repacked
// words / dk. The arithmetic of the comment above, kF keys per native vector.
template <int B>
MOETIER_FA_INLINE void scores_q8(const int8_t* c, const float* dq, const int32_t* init, int64_t hd,
                                 const uint32_t* words, const float* dk, int64_t n_keys, float scale, float* s) {
  const int64_t nb = hd / kQK8_0;
  for (int64_t j = 0; j < n_keys; j += kF) {
    VF acc[B];
    #pragma GCC unroll 16
    for (int q = 0; q < B; ++q) acc[q] = VF{};
    for (int64_t b = 0; b < nb; ++b) {
      VI isum[B];
      #pragma GCC unroll 16
      for (int q = 0; q < B; ++q) isum[q] = init[q * nb + b] - VI{};
      const uint32_t* kb = words + b * 8 * kTile + j;
      #pragma GCC unroll 16
      for (int w = 0; w < 8; ++w) {
        const VI k = load<VI>(kb + w * kTile);
        const VI k_abs = abs_codes(k);
        #pragma GCC unroll 16
        for (int q = 0; q < B; ++q) {
          int32_t cw;
          std::memcpy(&cw, c + q * hd + b * kQK8_0 + 4 * w, 4);
          isum[q] = dot4(isum[q], k, k_abs, cw - VI{});
        }
      }
      const VF d = load<VF>(dk + b * kTile + j);
      #pragma GCC unroll 16
      for (int q = 0; q < B; ++q) {
        acc[q] = fmadd(__builtin_convertvector(isum[q], VF), d * splat(dq[q * nb + b]), acc[q]);
      }
    }
    #pragma GCC unroll 16
    for (int q = 0; q < B; ++q) store(s + q * kTile + j, acc[q] * scale);
  }
}

// For B query vectors: acc = Σ_{j < n_keys} p[b][j]·v[j] (keys in order, per column), then
// o[b] = acc on the part's first tile, o[b]·alpha[b] + acc after it. kCols columns at a
// time (two native vectors per row: independent accumulators hide the add latency).
// More than 4 vectors per block in 16 registers: one native vector of columns.
// v_row(j, col): the kF values of V row j from column col (a multiple of kF).
constexpr int kCols = kVecBytes == 16 ? 16 : 2 * kF;
template <int B, class VRow>
MOETIER_FA_INLINE void accumulate_values(const float* p, int64_t n_keys, const VRow& v_row, int64_t hd, bool first,
                                         const float* alpha, float* o) {
  constexpr int P = B > 4 && kVecBytes < 64 ? 1 : kCols / kF;
  for (int64_t c = 0; c < hd; c += P * kF) {
    VF acc[B][P];
    #pragma GCC unroll 16
    for (int b = 0; b < B; ++b) {
      #pragma GCC unroll 16
      for (int q = 0; q < P; ++q) acc[b][q] = VF{};
    }
    for (int64_t j = 0; j < n_keys; ++j) {
      #pragma GCC unroll 16
      for (int q = 0; q < P; ++q) {
        const VF vj = v_row(j, c + q * kF);
        #pragma GCC unroll 16
        for (int b = 0; b < B; ++b) acc[b][q] = fmadd(splat(p[b * kTile + j]), vj, acc[b][q]);
      }
    }
    #pragma GCC unroll 16
    for (int b = 0; b < B; ++b) {
      #pragma GCC unroll 16
      for (int q = 0; q < P; ++q) {
        float* dst = o + b * hd + c + q * kF;
        store(dst, first ? acc[b][q] : fmadd(load<VF>(dst), splat(alpha[b]), acc[b][q]));
      }
    }
  }
}

// Runs `fn.template operator()<B>(r)` over vectors [begin, end) in blocks of kMax (the last
// block smaller); kMax ≤ 8.
template <int kMax = kBlock, class Fn>
MOETIER_FA_INLINE void for_blocks(int64_t begin, int64_t end, Fn&& fn) {
  static_assert(kMax >= 4 && kMax <= 8);
  int64_t r = begin;
  for (; r + kMax <= end; r += kMax) fn.template operator()<kMax>(r);
  switch (end - r) {
    case 7: if constexpr (kMax > 7) fn.template operator()<7>(r); break;
    case 6: if constexpr (kMax > 6) fn.template operator()<6>(r); break;
    case 5: if constexpr (kMax > 5) fn.template operator()<5>(r); break;
    case 4: if constexpr (kMax > 4) fn.template operator()<4>(r); break;
    case 3: fn.template operator()<3>(r); break;
    case 2: fn.template operator()<2>(r); break;
    case 1: fn.template operator()<1>(r); break;
    default: break;
  }
}

// Vectors per KV head up to which a task reads an f16 K cache and an f16 or q8_0 V cache
// in place (converting in registers) instead of converting each tile into the scratch
// buffers first: decode (one row of a GQA group of ≤ 8 heads) uses each K/V element in one
// register block, so the buffers would only add a store and a reload of every element (a
// third of a deep decode's time went to those stores, waiting on the cache reads behind
// them). A q8_0 K cache is repacked instead (integer scores, above): 64 keys × head_dim
// bytes, which stay in L1 where a converted f32 tile (4× the bytes) did not.
constexpr int64_t kInPlaceMaxVectors = 8;

struct Ctx {
  const FlashAttentionTask& t;
  Layout L;
  float* f;
  double* d;
  int64_t n_vec() const { return t.n_vectors(); }
  // Vectors are numbered KV head first: v = g·(n_rows·n_heads) + row·n_heads + h, so the
  // vectors reading one KV head are consecutive and ordered by row.
  int64_t per_kv() const { return t.n_rows * t.n_heads; }
  int64_t row_of(int64_t v) const { return v % per_kv() / t.n_heads; }
  // Query head (within the task) of vector v.
  int64_t head_of(int64_t v) const { return v / per_kv() * t.n_heads + v % t.n_heads; }
  // Keys vector v sees: its row's position + 1.
  int64_t keys_of(int64_t v) const { return t.pos0 + row_of(v) + 1; }
};

// The query vectors, contiguous [n_vec][hd] in vector order, for the register blocks of
// scores(); with a Q8_0 K cache quantized instead, for scores_q8().
inline void prepare_queries(const Ctx& c) {
  const FlashAttentionTask& t = c.t;
  const int64_t hd = t.head_dim, nb = hd / kQK8_0;
  float* qd = c.f + c.L.q;
  const QuantQueries qq = quant_queries(qd, c.n_vec(), hd);
  for (int64_t v = 0; v < c.n_vec(); ++v) {
    const float* q = t.q + c.row_of(v) * t.q_row_stride + c.head_of(v) * hd;
    if (t.k.type == DType::Q8_0) {
      quantize_query(q, hd, qq.codes + v * hd, qq.d + v * nb, qq.init + v * nb);
    } else {
      std::memcpy(qd + v * hd, q, static_cast<size_t>(hd) * sizeof(float));
    }
  }
}

// One part's state for every query vector into `out` (rows that do not reach the part get
// l = 0). The online softmax of flash_attention.h over the part's tiles.
inline void run_part(const Ctx& c, int64_t part, const FlashPartial& out) {
  const FlashAttentionTask& t = c.t;
  const int64_t hd = t.head_dim, n_vec = c.n_vec();
  const int64_t key_begin = part * kFlashPartKeys;  // (n_vec: every KV head's vectors)
  const int64_t key_end = std::min(key_begin + kFlashPartKeys, t.n_keys());
  const float* qv = c.f + c.L.q;
  float* s = c.f + c.L.s;
  float* alpha = c.f + c.L.alpha;
  for (int64_t r = 0; r < n_vec; ++r) out.l[r] = 0;
  // Decode (≤ kInPlaceMaxVectors vectors per KV head): f16 K and f16 / q8_0 V are read in
  // place, converted in registers. Q8_0 K is always repacked for the integer scores.
  const bool small = c.per_kv() <= kInPlaceMaxVectors;
  const bool k_in_place = small && t.k.type == DType::F16;
  const bool v_in_place = small && (t.v.type == DType::F16 || t.v.type == DType::Q8_0);
  const int64_t width = t.n_kv_heads * hd;
  int64_t k_first = 0, k_bytes = 0, v_first = 0, v_bytes = 0;
  head_bytes(t.k, width, &k_first, &k_bytes);
  head_bytes(t.v, width, &v_first, &v_bytes);
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kTile) {
    const int64_t tk = std::min(kTile, key_end - j0);
    const bool first = j0 == key_begin;
    // Rows before row_first do not reach this tile (causal mask); their state stays.
    const int64_t row_first = std::max<int64_t>(0, j0 - t.pos0);
    const auto count = [&](int64_t r) { return std::min(tk, c.keys_of(r) - j0); };  // ≥ 1 from row_first on
    const int64_t n_next = std::min(kTile, key_end - j0 - tk);  // ≤ 0: this is the part's last tile
    // One KV head's work on this tile: scores by score_block(g, r, n) for the vectors
    // [r, r + B) in blocks of kMaxS (n: the block's largest visible count, its last
    // vector's), then P·V by value_block(g, r, n) in blocks of kMaxV.
    const auto per_kv_head = [&]<int kMaxS, int kMaxV>(const auto& score_block, const auto& value_block) {
      for (int64_t g = 0; g < t.n_kv_heads; ++g) {
        // KV head g's vectors [vec_first, vec_end).
        const int64_t vec_first = g * c.per_kv() + row_first * t.n_heads, vec_end = (g + 1) * c.per_kv();
        for_blocks<kMaxS>(vec_first, vec_end, [&]<int B>(int64_t r) {
          score_block.template operator()<B>(g, r, count(r + B - 1));
        });
        // Online softmax: p_j = e^(s_j − m) for the visible keys, 0 for the masked ones.
        for (int64_t r = vec_first; r < vec_end; ++r) {
          float* sr = s + r * kTile;
          const int64_t n = count(r);
          float mx = sr[0];
          for (int64_t j = 1; j < n; ++j) mx = std::max(mx, sr[j]);
          const float m_new = first ? mx : std::max(out.m[r], mx);
          double sum = 0;
          VF lane;
          for (int i = 0; i < kF; ++i) lane[i] = static_cast<float>(i);
          for (int64_t j = 0; j < tk; j += kF, lane += static_cast<float>(kF)) {
            const VF p = exp_nonpositive(load<VF>(sr + j) - m_new);
            store(sr + j, lane < static_cast<float>(n) ? p : VF{});
          }
          for (int64_t j = 0; j < n; ++j) sum += sr[j];
          if (first) {
            out.l[r] = sum;
          } else {
            alpha[r] = exp_nonpositive(out.m[r] - m_new);
            out.l[r] = out.l[r] * alpha[r] + sum;
          }
          out.m[r] = m_new;
        }
        for_blocks<kMaxV>(vec_first, vec_end, [&]<int B>(int64_t r) {
          value_block.template operator()<B>(g, r, count(r + B - 1));
        });
      }
    };
    // Ask for the next tile's rows read in place now; they arrive while this tile is
    // computed (tile_rows and repack_keys_q8 prefetch the rows they convert).
    for (int64_t j = 0; j < n_next; ++j) {
      if (k_in_place) prefetch_row(t.k, k_first, k_bytes, j0 + tk + j);
      if (v_in_place) prefetch_row(t.v, v_first, v_bytes, j0 + tk + j);
    }
    // P·V for a given score_block: V in place (f16 or q8_0 rows) or converted.
    const auto with_values = [&]<int kMaxS>(const auto& score_block) {
      const auto accumulate = [&]<int B>(int64_t r, int64_t n, const auto& v_row) {
        accumulate_values<B>(s + r * kTile, n, v_row, hd, first, alpha + r, out.o + r * hd);
      };
      if (v_in_place && t.v.type == DType::F16) {
        const auto* v = reinterpret_cast<const uint16_t*>(t.v.data + j0 * t.v.row_bytes) + t.v.first;
        const int64_t v_stride = t.v.row_bytes / 2;
        per_kv_head.template operator()<kMaxS, 8>(score_block, [&]<int B>(int64_t g, int64_t r, int64_t n) {
          const uint16_t* vg = v + g * hd;
          accumulate.template operator()<B>(r, n, [&](int64_t j, int64_t col) { return load_f(vg + j * v_stride + col); });
        });
      } else if (v_in_place) {
        const uint8_t* v = t.v.data + j0 * t.v.row_bytes;
        per_kv_head.template operator()<kMaxS, 8>(score_block, [&]<int B>(int64_t g, int64_t r, int64_t n) {
          const int64_t first_block = (t.v.first + g * hd) / kQK8_0;
          accumulate.template operator()<B>(r, n, [&](int64_t j, int64_t col) {
            return load_q8(reinterpret_cast<const BlockQ8_0*>(v + j * t.v.row_bytes) + first_block, col);
          });
        });
      } else {
        int64_t v_stride = 0;
        const float* v = tile_rows(t.v, width, j0, tk, c.f + c.L.vbuf, &v_stride, j0 + tk, n_next);
        per_kv_head.template operator()<kMaxS, kBlock>(score_block, [&]<int B>(int64_t g, int64_t r, int64_t n) {
          const float* vg = v + g * hd;
          accumulate.template operator()<B>(r, n, [&](int64_t j, int64_t col) { return load_f(vg + j * v_stride + col); });
        });
      }
    };
    if (k_in_place) {
      const auto* k = reinterpret_cast<const uint16_t*>(t.k.data + j0 * t.k.row_bytes) + t.k.first;
      const int64_t k_stride = t.k.row_bytes / 2;
      with_values.template operator()<8>([&]<int B>(int64_t g, int64_t r, int64_t n) {
        scores<B>(qv + r * hd, hd, k + g * hd, k_stride, n, t.scale, s + r * kTile);
      });
    } else if (t.k.type == DType::Q8_0) {
      // Integer Q·K: the tile's keys repacked (into the K buffer), the queries' codes.
      const int64_t nb = hd / kQK8_0;
      auto* words = reinterpret_cast<uint32_t*>(c.f + c.L.kbuf);
      float* dk = c.f + c.L.kbuf + kTile * width / 4;
      repack_keys_q8(t.k, width, j0, tk, words, dk, j0 + tk, n_next);
      const QuantQueries qq = quant_queries(c.f + c.L.q, n_vec, hd);
      with_values.template operator()<kBlock>([&]<int B>(int64_t g, int64_t r, int64_t n) {
        scores_q8<B>(qq.codes + r * hd, qq.d + r * nb, qq.init + r * nb, hd, words + g * nb * 8 * kTile,
                     dk + g * nb * kTile, n, t.scale, s + r * kTile);
      });
    } else {
      int64_t k_stride = 0;
      const float* k = tile_rows(t.k, width, j0, tk, c.f + c.L.kbuf, &k_stride, j0 + tk, n_next);
      with_values.template operator()<kBlock>([&]<int B>(int64_t g, int64_t r, int64_t n) {
        scores<B>(qv + r * hd, hd, k + g * hd, k_stride, n, t.scale, s + r * kTile);
      });
    }
  }
}

// total ← total ⊕ part for every vector (see flash_attention.h); l = 0 marks "empty".
inline void fold(const Ctx& c, const FlashPartial& total, const FlashPartial& part) {
  const int64_t hd = c.t.head_dim;
  for (int64_t r = 0; r < c.n_vec(); ++r) {
    if (part.l[r] == 0) continue;
    float* o = total.o + r * hd;
    const float* op = part.o + r * hd;
    if (total.l[r] == 0) {
      std::memcpy(o, op, static_cast<size_t>(hd) * sizeof(float));
      total.m[r] = part.m[r];
      total.l[r] = part.l[r];
      continue;
    }
    const float m = std::max(total.m[r], part.m[r]);
    const float a = exp_nonpositive(total.m[r] - m), b = exp_nonpositive(part.m[r] - m);
    for (int64_t i = 0; i < hd; ++i) o[i] = o[i] * a + op[i] * b;
    total.l[r] = total.l[r] * a + part.l[r] * b;
    total.m[r] = m;
  }
}

// out = o / l (· sigmoid(gate)) per vector.
inline void finish(const Ctx& c, const FlashPartial& total) {
  const FlashAttentionTask& t = c.t;
  const int64_t hd = t.head_dim;
  for (int64_t vec = 0; vec < c.n_vec(); ++vec) {
    const int64_t r = c.row_of(vec), h = c.head_of(vec);
    const float* o = total.o + vec * hd;
    float* dst = t.out + r * t.out_row_stride + h * hd;
    const float inv = static_cast<float>(1.0 / total.l[vec]);
    for (int64_t i = 0; i < hd; ++i) dst[i] = o[i] * inv;
    if (t.gate) {
      const float* g = t.gate + r * t.gate_row_stride + h * hd;
      for (int64_t i = 0; i < hd; ++i) dst[i] *= sigmoid(g[i]);
    }
  }
}

inline Ctx context(const FlashAttentionTask& t, FlashScratch& scratch) {
  scratch.reserve_for(t.head_dim, t.n_kv_heads, t.n_vectors());
  return Ctx{.t = t,
             .L = layout(t.head_dim, t.n_kv_heads * t.head_dim, t.n_vectors()),
             .f = scratch.f.data(),
             .d = scratch.d.data()};
}

inline FlashPartial total_state(const Ctx& c) {
  return {.o = c.f + c.L.o_tot, .m = c.f + c.L.m_tot, .l = c.d + c.L.l_tot};
}

inline void attend_impl(const FlashAttentionTask& t, FlashScratch& scratch) {
  const Ctx c = context(t, scratch);
  prepare_queries(c);
  const FlashPartial total = total_state(c);
  const FlashPartial part{.o = c.f + c.L.o_part, .m = c.f + c.L.m_part, .l = c.d + c.L.l_part};
  for (int64_t r = 0; r < t.n_vectors(); ++r) total.l[r] = 0;
  for (int64_t p = 0; p < t.n_parts(); ++p) {
    run_part(c, p, part);
    fold(c, total, part);
  }
  finish(c, total);
}

inline void attend_part_impl(const FlashAttentionTask& t, int64_t part, FlashScratch& scratch,
                             const FlashPartial& out) {
  const Ctx c = context(t, scratch);
  prepare_queries(c);
  run_part(c, part, out);
}

inline void combine_impl(const FlashAttentionTask& t, const FlashPartial* parts, int64_t n_parts,
                         FlashScratch& scratch) {
  const Ctx c = context(t, scratch);
  const FlashPartial total = total_state(c);
  for (int64_t r = 0; r < t.n_vectors(); ++r) total.l[r] = 0;
  for (int64_t p = 0; p < n_parts; ++p) fold(c, total, parts[p]);
  finish(c, total);
}

#undef MOETIER_FA_INLINE

}  // namespace
}  // namespace moetier::cpu::flash

