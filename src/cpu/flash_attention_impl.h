// The flash-attention kernels' code (see flash_attention.h for the arithmetic), included by
// flash_attention.cpp (base ISA), flash_attention_avx2.cpp and flash_attention_avx512.cpp,
// which compile it with their ISA's flags. Written with GCC vector extensions of the unit's
// native width over a fixed lane layout (the dot products' 8 double lanes; everything else
// element-wise), and the units are compiled without FMA contraction, so the three variants
// are bit-identical. Everything here has internal linkage: each unit keeps its own copy,
// compiled for its own ISA.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/flash_attention.h"
#include "cpu/ops.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

#if defined(__F16C__) || defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// 64-byte vectors only live inside inlined code (no ABI crossing); GCC reports -Wpsabi at the
// end of the unit, so the warning stays off for the including unit (only the kernel units).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace moetier::cpu::flash {
namespace {

#define MOETIER_FA_INLINE inline __attribute__((always_inline))

// Native vectors of the unit's ISA: 64 bytes (AVX-512), 32 (AVX2) or 16 (SSE2). The lanes
// the arithmetic is defined on (8 double lanes per dot product; everything else is
// element-wise) are spread over as many native vectors as needed, so every ISA computes the
// same lane values in the same order.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif
using VF = float __attribute__((vector_size(kVecBytes)));
using VI = int32_t __attribute__((vector_size(kVecBytes)));
using VD = double __attribute__((vector_size(kVecBytes)));
using HF = float __attribute__((vector_size(kVecBytes / 2)));  // as many floats as VD has doubles
constexpr int kF = kVecBytes / 4;  // float lanes per native vector
constexpr int kD = kVecBytes / 8;  // double lanes per native vector

constexpr int64_t kTile = kFlashKeyTile;
// Query vectors per register block (scores and P·V): 8 with AVX-512's 32 registers, 4 else.
constexpr int kBlock = kVecBytes == 64 ? 8 : 4;

template <class V, class T>
MOETIER_FA_INLINE V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <class V, class T>
MOETIER_FA_INLINE void store(T* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}
MOETIER_FA_INLINE VF splat(float x) { return VF{} + x; }

// Exact float → double lanes (one instruction with AVX-512; GCC splits the generic form).
MOETIER_FA_INLINE VD to_double(HF x) {
#if defined(__AVX512F__)
  return _mm512_maskz_cvtps_pd(0xFF, x);  // (the unmasked form trips -Wmaybe-uninitialized)
#elif defined(__AVX__)
  return _mm256_cvtps_pd(x);
#else
  return __builtin_convertvector(x, VD);
#endif
}

// a·b + c for the dot products' double lanes, whose a·b (a float times a float) is exact in
// double: a fused multiply-add rounds once, like the separate add, so both give the same bits
// and the ISA builds use the FMA unit.
MOETIER_FA_INLINE VD madd(VD a, VD b, VD c) {
#if defined(__FMA__) && defined(__AVX512F__)
  return _mm512_fmadd_pd(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_pd(a, b, c);
#else
  return a * b + c;
#endif
}

// e^x lane-wise for x ≤ 0: x = n·ln2 + r (Cody–Waite, |r| ≤ ln2/2), Cephes's degree-6
// polynomial for e^r (≤ 2 ulp from e^x), 2^n from the exponent bits. Lanes below −87 (and
// −inf) give 0: e^−87 < 2^−125, below float resolution next to the row max's weight 1.
// e^0 is exactly 1.
MOETIER_FA_INLINE VF exp_nonpositive(VF x) {
  const VF fx = x * 1.44269504088896341f + 0.5f;
  VF n = __builtin_convertvector(__builtin_convertvector(fx, VI), VF);  // trunc
  n = n > fx ? n - 1.0f : n;                                             // floor
  VF r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const VF r2 = r * r;
  VF y = splat(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r2 + r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  VF pow2;
  std::memcpy(&pow2, &bits, sizeof(pow2));
  y = y * pow2;
  return x < -87.0f ? VF{} : y;
}
MOETIER_FA_INLINE float exp_nonpositive(float x) { return exp_nonpositive(splat(x))[0]; }

// The 8 double lanes a[0..7] of a dot product (kPieces native vectors) summed as
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
constexpr int kPieces = 8 / kD;
MOETIER_FA_INLINE double hsum(const VD (&a)[kPieces]) {
#if defined(__AVX512F__)
  using V4 = double __attribute__((vector_size(32)));
  const V4 s = __builtin_shufflevector(a[0], a[0], 0, 1, 2, 3) + __builtin_shufflevector(a[0], a[0], 4, 5, 6, 7);
  return (s[0] + s[2]) + (s[1] + s[3]);
#elif defined(__AVX__)
  const VD s = a[0] + a[1];
  return (s[0] + s[2]) + (s[1] + s[3]);
#else
  const VD s02 = a[0] + a[2], s13 = a[1] + a[3];  // [a0+a4, a1+a5], [a2+a6, a3+a7]
  return (s02[0] + s13[0]) + (s02[1] + s13[1]);
#endif
}

// The working memory of one task inside FlashScratch (offsets in its f / d arrays).
struct Layout {
  int64_t kbuf, vbuf, s, o_part, o_tot, m_part, m_tot, alpha;  // floats
  int64_t qd, l_part, l_tot;                                    // doubles
  int64_t n_f, n_d;
};

MOETIER_FA_INLINE Layout layout(int64_t hd, int64_t n_vec) {
  Layout L{};
  int64_t f = 0;
  const auto take = [](int64_t& at, int64_t n) {
    const int64_t here = at;
    at += (n + 15) / 16 * 16;  // 64-byte steps
    return here;
  };
  L.kbuf = take(f, kTile * hd);
  L.vbuf = take(f, kTile * hd);
  L.s = take(f, n_vec * kTile);
  L.o_part = take(f, n_vec * hd);
  L.o_tot = take(f, n_vec * hd);
  L.m_part = take(f, n_vec);
  L.m_tot = take(f, n_vec);
  L.alpha = take(f, n_vec);
  int64_t d = 0;
  L.qd = take(d, n_vec * hd);
  L.l_part = take(d, n_vec);
  L.l_tot = take(d, n_vec);
  L.n_f = f;
  L.n_d = d;
  return L;
}

// Rows [j0, j0 + n) of one KV head as f32: F32 caches are read in place, other types are
// converted into buf [n][hd] (the same values as the cache type's dequantize_row).
// Returns the first row; *stride receives the distance between rows in floats.
MOETIER_FA_INLINE const float* tile_rows(const KvHeadRows& kv, int64_t hd, int64_t j0, int64_t n, float* buf,
                                         int64_t* stride) {
  const uint8_t* row0 = kv.data + j0 * kv.row_bytes;
  switch (kv.type) {
    case DType::F32:
      *stride = kv.row_bytes / static_cast<int64_t>(sizeof(float));
      return reinterpret_cast<const float*>(row0) + kv.first;
    case DType::F16:
      for (int64_t j = 0; j < n; ++j) {
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

// Asks for rows [j0, j0 + n) of one KV head's slice to be brought into the cache (the next
// tile, while the current one is computed: the cache rows are strided and stream from DRAM
// in a long decode).
MOETIER_FA_INLINE void prefetch_rows(const KvHeadRows& kv, int64_t hd, int64_t j0, int64_t n) {
  int64_t first_byte = 0, bytes = 0;
  switch (kv.type) {
    case DType::F32: first_byte = kv.first * 4, bytes = hd * 4; break;
    case DType::F16: first_byte = kv.first * 2, bytes = hd * 2; break;
    case DType::Q8_0: first_byte = kv.first / kQK8_0 * 34, bytes = hd / kQK8_0 * 34; break;
    case DType::Q4_0: first_byte = kv.first / kQK4_0 * 18, bytes = hd / kQK4_0 * 18; break;
    default: return;
  }
  for (int64_t j = j0; j < j0 + n; ++j) {
    const uint8_t* row = kv.data + j * kv.row_bytes + first_byte;
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
    __builtin_prefetch(row + bytes - 1);
  }
}

// s[b][j] = float(Σ_i qd[b][i]·k[j][i]) · scale for B query vectors (qd: [B][hd] doubles)
// and keys j < n_keys. Lane l of the 8 double lanes sums elements i ≡ l (mod 8) in order.
// kKeys keys per pass: enough independent accumulators to hide the add latency (each key's
// lanes are its own, so this does not change any result).
constexpr int kKeys = kPieces == 1 ? 2 : 1;
template <int B>
MOETIER_FA_INLINE void scores(const double* qd, int64_t hd, const float* k, int64_t k_stride, int64_t n_keys,
                              float scale, float* s) {
  const auto run = [&]<int K>(int64_t j) {
    VD acc[K][B][kPieces];
    for (int key = 0; key < K; ++key) {
      for (int b = 0; b < B; ++b) {
        for (int p = 0; p < kPieces; ++p) acc[key][b][p] = VD{};
      }
    }
    for (int64_t i = 0; i < hd; i += 8) {
      for (int p = 0; p < kPieces; ++p) {
        VD kd[K];
        for (int key = 0; key < K; ++key) {
          kd[key] = to_double(load<HF>(k + (j + key) * k_stride + i + p * kD));
        }
        for (int b = 0; b < B; ++b) {
          const VD q = load<VD>(qd + b * hd + i + p * kD);
          for (int key = 0; key < K; ++key) acc[key][b][p] = madd(q, kd[key], acc[key][b][p]);
        }
      }
    }
    for (int key = 0; key < K; ++key) {
      for (int b = 0; b < B; ++b) s[b * kTile + j + key] = static_cast<float>(hsum(acc[key][b])) * scale;
    }
  };
  int64_t j = 0;
  for (; j + kKeys <= n_keys; j += kKeys) run.template operator()<kKeys>(j);
  for (; j < n_keys; ++j) run.template operator()<1>(j);
}

// For B query vectors: acc = Σ_{j < n_keys} p[b][j]·v[j] (keys in order, per column), then
// o[b] = acc on the part's first tile, o[b]·alpha[b] + acc after it. kCols columns at a
// time (two native vectors per row: independent accumulators hide the add latency).
constexpr int kCols = kVecBytes == 16 ? 16 : 2 * kF;
template <int B>
MOETIER_FA_INLINE void accumulate_values(const float* p, int64_t n_keys, const float* v, int64_t v_stride, int64_t hd,
                                         bool first, const float* alpha, float* o) {
  constexpr int P = kCols / kF;
  for (int64_t c = 0; c < hd; c += kCols) {
    VF acc[B][P];
    for (int b = 0; b < B; ++b) {
      for (int q = 0; q < P; ++q) acc[b][q] = VF{};
    }
    for (int64_t j = 0; j < n_keys; ++j) {
      for (int q = 0; q < P; ++q) {
        const VF vj = load<VF>(v + j * v_stride + c + q * kF);
        for (int b = 0; b < B; ++b) acc[b][q] += p[b * kTile + j] * vj;
      }
    }
    for (int b = 0; b < B; ++b) {
      for (int q = 0; q < P; ++q) {
        float* dst = o + b * hd + c + q * kF;
        store(dst, first ? acc[b][q] : load<VF>(dst) * alpha[b] + acc[b][q]);
      }
    }
  }
}

// Runs `fn.template operator()<B>(r)` over vectors [begin, end) in blocks of kBlock (the
// last block smaller).
template <class Fn>
MOETIER_FA_INLINE void for_blocks(int64_t begin, int64_t end, Fn&& fn) {
  int64_t r = begin;
  for (; r + kBlock <= end; r += kBlock) fn.template operator()<kBlock>(r);
  switch (end - r) {
    case 7: if constexpr (kBlock > 7) fn.template operator()<7>(r); break;
    case 6: if constexpr (kBlock > 6) fn.template operator()<6>(r); break;
    case 5: if constexpr (kBlock > 5) fn.template operator()<5>(r); break;
    case 4: if constexpr (kBlock > 4) fn.template operator()<4>(r); break;
    case 3: fn.template operator()<3>(r); break;
    case 2: fn.template operator()<2>(r); break;
    case 1: fn.template operator()<1>(r); break;
    default: break;
  }
}

struct Ctx {
  const FlashAttentionTask& t;
  Layout L;
  float* f;
  double* d;
  int64_t n_vec() const { return t.n_vectors(); }
  // Keys vector r sees: its row's position + 1.
  int64_t keys_of(int64_t r) const { return t.pos0 + r / t.n_heads + 1; }
};

// The query vectors as doubles (exact), for the double-lane dot products.
inline void prepare_queries(const Ctx& c) {
  const FlashAttentionTask& t = c.t;
  double* qd = c.d + c.L.qd;
  for (int64_t r = 0; r < t.n_rows; ++r) {
    for (int64_t h = 0; h < t.n_heads; ++h) {
      const float* q = t.q + r * t.q_row_stride + h * t.head_dim;
      double* dst = qd + (r * t.n_heads + h) * t.head_dim;
      for (int64_t i = 0; i < t.head_dim; ++i) dst[i] = q[i];
    }
  }
}

// One part's state for every query vector into `out` (rows that do not reach the part get
// l = 0). The online softmax of flash_attention.h over the part's tiles.
inline void run_part(const Ctx& c, int64_t part, const FlashPartial& out) {
  const FlashAttentionTask& t = c.t;
  const int64_t hd = t.head_dim, n_vec = c.n_vec();
  const int64_t key_begin = part * kFlashPartKeys;
  const int64_t key_end = std::min(key_begin + kFlashPartKeys, t.n_keys());
  const double* qd = c.d + c.L.qd;
  float* s = c.f + c.L.s;
  float* alpha = c.f + c.L.alpha;
  for (int64_t r = 0; r < n_vec; ++r) out.l[r] = 0;
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kTile) {
    const int64_t tk = std::min(kTile, key_end - j0);
    const bool first = j0 == key_begin;
    // Rows before row_first do not reach this tile (causal mask); their state stays.
    const int64_t row_first = std::max<int64_t>(0, j0 - t.pos0);
    const int64_t vec_first = row_first * t.n_heads;
    const auto count = [&](int64_t r) { return std::min(tk, c.keys_of(r) - j0); };  // ≥ 1 from vec_first on
    int64_t k_stride = 0, v_stride = 0;
    const float* k = tile_rows(t.k, hd, j0, tk, c.f + c.L.kbuf, &k_stride);
    const float* v = tile_rows(t.v, hd, j0, tk, c.f + c.L.vbuf, &v_stride);
    if (j0 + tk < key_end) {
      const int64_t next = std::min(kTile, key_end - j0 - tk);
      prefetch_rows(t.k, hd, j0 + tk, next);
      prefetch_rows(t.v, hd, j0 + tk, next);
    }
    // Scores up to the block's largest visible count (its last vector's).
    for_blocks(vec_first, n_vec, [&]<int B>(int64_t r) {
      scores<B>(qd + r * hd, hd, k, k_stride, count(r + B - 1), t.scale, s + r * kTile);
    });
    // Online softmax: p_j = e^(s_j − m) for the visible keys, 0 for the masked ones.
    for (int64_t r = vec_first; r < n_vec; ++r) {
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
    for_blocks(vec_first, n_vec, [&]<int B>(int64_t r) {
      accumulate_values<B>(s + r * kTile, count(r + B - 1), v, v_stride, hd, first, alpha + r, out.o + r * hd);
    });
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
  for (int64_t r = 0; r < t.n_rows; ++r) {
    for (int64_t h = 0; h < t.n_heads; ++h) {
      const int64_t vec = r * t.n_heads + h;
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
}

inline Ctx context(const FlashAttentionTask& t, FlashScratch& scratch) {
  scratch.reserve_for(t.head_dim, t.n_vectors());
  return Ctx{.t = t, .L = layout(t.head_dim, t.n_vectors()), .f = scratch.f.data(), .d = scratch.d.data()};
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

