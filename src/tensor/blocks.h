// Block layouts, byte-for-byte identical to ggml's (GGUF files store these verbatim).
// `fp16_t` is an IEEE half stored as its 16 raw bits (little-endian in files).
// Element order: a row of `n` values is n / QK consecutive blocks.
#pragma once

#include <cstdint>

namespace moetier {

using fp16_t = uint16_t;
using bf16_t = uint16_t;

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;           // super-block of the K-quants and IQ4_XS
inline constexpr int kKScaleSize = 12;      // packed 6-bit scales+mins of Q4_K / Q5_K

// Q4_0: 32 values, x = d * (q - 8), q in [0, 15]. qs[j] holds element j (low nibble) and
// element j + 16 (high nibble).
struct BlockQ4_0 {
  fp16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q8_0: 32 values, x = d * q, q in [-127, 127].
struct BlockQ8_0 {
  fp16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_K: 256 values in 8 sub-blocks of 32; x = d * sc[j] * q - dmin * m[j], q in [0, 15],
// sc[j] and m[j] 6-bit, packed into the 12 `scales` bytes as:
//   bytes 0..3 : sc[0..3] in bits 0-5; bits 6-7 hold the high 2 bits of sc[4..7]
//   bytes 4..7 : m[0..3]  in bits 0-5; bits 6-7 hold the high 2 bits of m[4..7]
//   bytes 8..11: low 4 bits of sc[4..7] in bits 0-3, low 4 bits of m[4..7] in bits 4-7
// qs: 4 groups of 32 bytes; group g holds sub-block 2g in low nibbles, 2g+1 in high
// (element i of the sub-block in byte i of the group).
struct BlockQ4_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K (same d, dmin, scales packing and qs layout for the low 4 bits), plus a
// fifth bit per value: bit j of qh[i] is the high bit of element i of sub-block j;
// q in [0, 31].
struct BlockQ5_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 256 values in 16 sub-blocks of 16; x = d * scales[j] * (q - 32), q in [0, 63],
// int8 scales (sub-block j = elements 16j..16j+15). Two halves of 128 values; in half h,
// element 32k + i (k = 0..3, i = 0..31) has its low 4 bits in ql[64h + 32(k % 2) + i]
// (low nibble for k < 2, high nibble for k >= 2) and its high 2 bits in bits 2k, 2k+1
// of qh[32h + i].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  fp16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: activation type of K-quant dot products. x = d * q; bsums[j] = sum of qs over
// the j-th group of 16 (lets the dot product apply the K-quants' mins cheaply).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// IQ4_XS: 256 values in 8 sub-blocks of 32; x = d * (ls - 32) * kIQ4NLValues[q], q a 4-bit
// index into a non-linear table; ls is 6-bit: low 4 bits in scales_l (nibble per
// sub-block), high 2 bits in scales_h (2 bits per sub-block).
struct BlockIQ4_XS {
  fp16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The non-linear 4-bit grid shared by IQ4_NL and IQ4_XS (values of the format itself).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace moetier
