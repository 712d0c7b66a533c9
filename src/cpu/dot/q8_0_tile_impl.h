// The Q8_0 · Q8_0 tile kernel (TileDotFn, cpu/dot.h), one source for the ISAs with a
// 256-bit VPDPBUSD: included by q8_0_tile_avxvnni.cpp (AVX-VNNI, VEX) and
// q8_0_tile_avx512.cpp (AVX512-VNNI + VL, EVEX), which define MOETIER_TILE_DPBUSD and
// MOETIER_TILE_NAME first; and by q8_0_tile_avx2.cpp (plain AVX2, MOETIER_TILE_SIGNED_CODES:
// signed codes and a MOETIER_TILE_DPBUSD on two signed operands).
//
// Packed weights, per 32-element block b of the kTileRows = 8 rows: 8 vectors k = 0..7 of
// 8 int32 lanes, lane i of vector k = row i's codes 4k..4k+3 (plus 128, as u8, for VPDPBUSD),
// so one step adds 4 products to each row's exact block sum; then the scalar reference's
// float step per lane, in block order: every (row, token) is bit-identical to
// q8_0_q8_0_scalar (the ranges: docs/numerics.md, "Tile kernels").
//
// The interleaved form (MOETIER_TILE_X8_NAME) reads the same vectors from the loader's groups
// (cpu/interleave.h), where codes are stored as in the file: VPDPBUSD's + 128 is one XOR per
// weight vector, shared by the tokens.
//
// Tokens go 4 at a time (the last group 1..3): per k one weight load serves 4 tokens; each
// token keeps two int32 chains (even and odd k) so 8 VPDPBUSD are in flight, enough to hide
// their latency; 8 chains + 4 float sums + weights + broadcast = 14 of 16 ymm registers.
#pragma once

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "cpu/dot.h"
#include "tensor/blocks.h"

#if !defined(MOETIER_TILE_DPBUSD) || !defined(MOETIER_TILE_NAME) || !defined(MOETIER_TILE_X8_NAME)
#error "define MOETIER_TILE_DPBUSD, MOETIER_TILE_NAME and MOETIER_TILE_X8_NAME before including q8_0_tile_impl.h"
#endif

namespace moetier::cpu::dot {

namespace {

// 4 bytes at p as one int32 (for a broadcast).
inline int32_t load_word(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

#if defined(MOETIER_TILE_SIGNED_CODES)
constexpr uint32_t kCodeFlip = 0;  // codes as stored, for a signed × signed MOETIER_TILE_DPBUSD
#else
constexpr uint32_t kCodeFlip = 0x80808080u;  // + 128 per byte
#endif

// The n_rows (≤ 8) rows' blocks into `packed` (n_blocks × 8 vectors, see above) and their
// scales into `scales` (n_blocks × 8 floats). Missing rows are zero codes (w + 128 = 128
// with VPDPBUSD), scale 0.
void pack_rows(const TileDotArgs& a, int64_t n_blocks, int32_t* packed, float* scales) {
  for (int i = 0; i < kTileRows; ++i) {
    const auto* row = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a.weight_rows) +
                                                         (i < a.n_rows ? i : 0) * a.weight_stride);
    for (int64_t b = 0; b < n_blocks; ++b) {
      int32_t* dst = packed + b * kTileRows * 8;
      for (int k = 0; k < 8; ++k) {
        // Adding 128 to each byte is flipping its top bit: xor 0x80 per byte.
        dst[k * kTileRows + i] = i < a.n_rows ? static_cast<int32_t>(static_cast<uint32_t>(load_word(row[b].qs + 4 * k)) ^ kCodeFlip)
                                              : static_cast<int32_t>(kCodeFlip);
      }
      scales[b * kTileRows + i] = i < a.n_rows ? _cvtsh_ss(row[b].d) : 0.0f;
    }
  }
}

// Where tile_tokens finds block b's codes and scales: the per-call packing above (codes with
// kCodeFlip applied, scales as floats), or an interleaved group as the loader stores it
// (cpu/interleave.h: per block 8 f16 scales, then the 8 vectors of stored codes).
struct PackedSource {
  const int32_t* packed;
  const float* scales;
  const __m256i* codes(int64_t b) const { return reinterpret_cast<const __m256i*>(packed + b * kTileRows * 8); }
  static __m256i word(const __m256i* w, int k) { return _mm256_load_si256(w + k); }
  __m256 d(int64_t b) const { return _mm256_loadu_ps(scales + b * kTileRows); }
  static void prefetch(int64_t) {}  // packed per call: already in L1
};
struct InterleavedSource {
  static constexpr int64_t kRunBytes = kTileRows * static_cast<int64_t>(sizeof(BlockQ8_0));  // 272
  const uint8_t* group;
  const __m256i* codes(int64_t b) const {
    return reinterpret_cast<const __m256i*>(group + b * kRunBytes + kTileRows * sizeof(uint16_t));
  }
  static __m256i word(const __m256i* w, int k) {
    const __m256i v = _mm256_loadu_si256(w + k);
    if constexpr (kCodeFlip == 0) return v;
    return _mm256_xor_si256(v, _mm256_set1_epi32(static_cast<int32_t>(kCodeFlip)));
  }
  // f16 → f32 is exact, so this is _cvtsh_ss per row.
  __m256 d(int64_t b) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + b * kRunBytes)));
  }
  // The stream kPrefetchBytes ahead of block b, which past the group's end is the next group
  // of the matrix, what the caller reads next (a prefetch past the tensor's end is harmless).
  // Without it a step of a few tokens, bound by its products, read the weights and multiplied
  // them one after the other: 4 tokens took 1.6-2.0x one token's time streaming from DRAM on
  // one core, 1.05-1.24x with it at 8 KiB (4 KiB: 1.3-1.4x; throwaway microbenchmark,
  // AVX-VNNI, AMD EPYC).
  static constexpr int64_t kPrefetchBytes = 8192;
  void prefetch(int64_t b) const {
    const uint8_t* ahead = group + b * kRunBytes + kPrefetchBytes;
    for (int64_t at = 0; at < kRunBytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + at), _MM_HINT_T0);
  }
};

template <int T, class Source>
void tile_tokens(const TileDotArgs& a, int64_t n_blocks, const Source& src, int64_t j0) {
  const BlockQ8_0* act[T];
  const Q8_0ActBlock* info[T];
  for (int t = 0; t < T; ++t) {
    act[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a.activation_rows) + (j0 + t) * a.activation_stride);
    info[t] = a.act_blocks + (j0 + t) * n_blocks;
  }
  __m256 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i* w = src.codes(b);
    src.prefetch(b);
    __m256i even[T], odd[T];
    for (int t = 0; t < T; ++t) {
#if defined(MOETIER_TILE_SIGNED_CODES)
      even[t] = _mm256_setzero_si256();
#else
      even[t] = _mm256_set1_epi32(info[t][b].offset);
#endif
      odd[t] = _mm256_setzero_si256();
    }
    for (int k = 0; k < 8; k += 2) {
      const __m256i w0 = Source::word(w, k);
      const __m256i w1 = Source::word(w, k + 1);
      for (int t = 0; t < T; ++t) even[t] = MOETIER_TILE_DPBUSD(even[t], w0, _mm256_set1_epi32(load_word(act[t][b].qs + 4 * k)));
      for (int t = 0; t < T; ++t) odd[t] = MOETIER_TILE_DPBUSD(odd[t], w1, _mm256_set1_epi32(load_word(act[t][b].qs + 4 * k + 4)));
    }
    const __m256 d_w = src.d(b);
    for (int t = 0; t < T; ++t) {
      // Reference: sum += float(isum) · (d_w · d_a).
      const __m256 d = _mm256_mul_ps(d_w, _mm256_set1_ps(info[t][b].d));
      const __m256 isum = _mm256_cvtepi32_ps(_mm256_add_epi32(even[t], odd[t]));
      sum[t] = _mm256_add_ps(sum[t], _mm256_mul_ps(isum, d));
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(32) float lanes[kTileRows];
    _mm256_store_ps(lanes, sum[t]);
    float* out = a.out + (j0 + t) * a.out_stride;
    for (int i = 0; i < a.n_rows; ++i) out[i] = lanes[i];
  }
}

template <class Source>
void tile_all_tokens(const TileDotArgs& a, int64_t n_blocks, const Source& src) {
  int64_t j = 0;
  for (; j + 4 <= a.n_act; j += 4) tile_tokens<4>(a, n_blocks, src, j);
  switch (a.n_act - j) {
    case 3: tile_tokens<3>(a, n_blocks, src, j); break;
    case 2: tile_tokens<2>(a, n_blocks, src, j); break;
    case 1: tile_tokens<1>(a, n_blocks, src, j); break;
    default: break;
  }
}

}  // namespace

void MOETIER_TILE_NAME(const TileDotArgs& a) {
  const int64_t n_blocks = a.n / kQK8_0;
  // ~n/32 · 288 bytes (9 KiB at n = 1024); reused for all tokens of the call.
  struct alignas(32) Vec {
    int32_t v[8];
  };
  std::vector<Vec> packed(static_cast<size_t>(n_blocks * 8));
  std::vector<float> scales(static_cast<size_t>(n_blocks * kTileRows));
  pack_rows(a, n_blocks, packed.data()->v, scales.data());
  tile_all_tokens(a, n_blocks, PackedSource{.packed = packed.data()->v, .scales = scales.data()});
}

// The interleaved form (DotKernel::tile_x8): the group is read as stored, so a call for one
// token or a few costs no packing; n_rows = kTileRows.
void MOETIER_TILE_X8_NAME(const TileDotArgs& a) {
  tile_all_tokens(a, a.n / kQK8_0, InterleavedSource{.group = static_cast<const uint8_t*>(a.weight_rows)});
}

}  // namespace moetier::cpu::dot
