// Q6_K: 256-value super-blocks, 16 sub-blocks of 16, symmetric 6-bit codes
// x = d * scales[j] * (q - 32) with an int8 scale per sub-block and one fp16 d.
//
// Code layout (blocks.h): the super-block is two halves of 128; in half h, element
// 32 * k + i (k = 0..3, i = 0..31) keeps its low 4 bits in ql[64 h + 32 (k % 2) + i]
// (low nibble for k < 2, high nibble for k >= 2) and its high 2 bits in bits 2k..2k+1
// of qh[32 h + i].
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_util.h"
#include "tensor/types/types.h"

namespace moetier::types {

namespace {

constexpr int kSubBlockSize = 16;
constexpr int kSubBlocks = kQK_K / kSubBlockSize;
constexpr int kCodeOffset = 32;           // stored code = signed level + 32, in [0, 63]
constexpr float kTinyGroupMax = 1e-15f;   // below this a sub-block counts as all zero

// Fits x[0..n) ≈ s * l with integer l in [-32, 31], minimising sum x^2 (s l - x)^2 (the
// x^2 importance favours large values). Tries 19 reciprocal scales that map the largest
// |x| to 31.1 .. 32.9 levels (sign chosen so that the extreme lands on -32 side, where
// the range is one level longer), and for each the least-squares s given the rounded l.
// Writes codes l + 32 and returns s (may be negative; 0 for an all-zero sub-block).
float fit_symmetric_scale(const float* x, int n, uint8_t* codes) {
  constexpr int kLevels = kCodeOffset;
  float extreme = 0;  // the signed value of largest magnitude (first one on ties)
  float extreme_abs = 0;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > extreme_abs) {
      extreme_abs = a;
      extreme = x[i];
    }
  }
  if (extreme_abs < kTinyGroupMax) {
    for (int i = 0; i < n; ++i) codes[i] = 0;
    return 0.0f;
  }
  auto level = [](float v) {
    const int l = nearest_int(v);
    return l < -kLevels ? -kLevels : (l > kLevels - 1 ? kLevels - 1 : l);
  };
  // Weighted sums for one reciprocal scale: sum w x l and sum w l^2 with w = x^2.
  struct Sums {
    float xl;
    float l2;
  };
  auto sums_for = [&](float inv_scale) {
    Sums s{0, 0};
    for (int i = 0; i < n; ++i) {
      const int l = level(inv_scale * x[i]);
      const float w = x[i] * x[i];
      s.xl += w * x[i] * l;
      s.l2 += w * l * l;
    }
    return s;
  };
  auto write_codes = [&](float inv_scale) {
    for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(level(inv_scale * x[i]) + kCodeOffset);
  };

  float inv_scale = -kLevels / extreme;
  write_codes(inv_scale);
  Sums s = sums_for(inv_scale);
  float scale = s.l2 ? s.xl / s.l2 : 0.0f;
  // For the least-squares scale the error is sum w x^2 - xl^2 / l2, so the best trial has
  // the largest xl^2 / l2 = scale * xl.
  float best = scale * s.xl;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    inv_scale = -(kLevels + 0.1f * k) / extreme;
    s = sums_for(inv_scale);
    if (s.l2 > 0 && s.xl * s.xl > best * s.l2) {
      write_codes(inv_scale);
      scale = s.xl / s.l2;
      best = scale * s.xl;
    }
  }
  return scale;
}

void pack_codes(const uint8_t codes[kQK_K], BlockQ6_K& block) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* c = codes + 128 * h;
    uint8_t* ql = block.ql + 64 * h;
    uint8_t* qh = block.qh + 32 * h;
    for (int i = 0; i < 32; ++i) {
      ql[i] = static_cast<uint8_t>((c[i] & 0x0F) | ((c[i + 64] & 0x0F) << 4));
      ql[i + 32] = static_cast<uint8_t>((c[i + 32] & 0x0F) | ((c[i + 96] & 0x0F) << 4));
      qh[i] = static_cast<uint8_t>((c[i] >> 4) | ((c[i + 32] >> 4) << 2) | ((c[i + 64] >> 4) << 4) |
                                   ((c[i + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K& block = blocks[b];
    const float d = fp16_to_f32(block.d);
    float* out = dst + b * kQK_K;
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128;
      const int k = (e % 128) / 32;
      const int i = e % 32;
      const int low = (block.ql[64 * h + 32 * (k % 2) + i] >> (4 * (k / 2))) & 0x0F;
      const int high = (block.qh[32 * h + i] >> (2 * k)) & 0x03;
      const int level = (low | (high << 4)) - kCodeOffset;
      const float step = d * block.scales[e / kSubBlockSize];
      out[e] = step * level;
    }
  }
}

void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  uint8_t codes[kQK_K];
  float sub_scale[kSubBlocks];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    BlockQ6_K& block = blocks[b];
    float max_scale = 0;  // signed scale of largest magnitude
    float max_abs_scale = 0;
    for (int j = 0; j < kSubBlocks; ++j) {
      sub_scale[j] = fit_symmetric_scale(x + kSubBlockSize * j, kSubBlockSize, codes + kSubBlockSize * j);
      const float a = std::fabs(sub_scale[j]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = sub_scale[j];
      }
    }
    if (max_abs_scale < kTinyGroupMax) {
      std::memset(&block, 0, sizeof(block));  // d = +0.0 in fp16 is all-zero bits
      continue;
    }
    // int8 scales relative to the largest: that one maps to -128 (the longer side).
    const float inv_d = -128.0f / max_scale;
    block.d = f32_to_fp16(1 / inv_d);
    for (int j = 0; j < kSubBlocks; ++j) {
      const int s = nearest_int(inv_d * sub_scale[j]);
      block.scales[j] = static_cast<int8_t>(s < -128 ? -128 : (s > 127 ? 127 : s));
    }
    // Re-round every value against the step the decoder will really use; a sub-block
    // whose stored scale is 0 keeps its fitted codes (they do not affect values).
    const float d = fp16_to_f32(block.d);
    for (int j = 0; j < kSubBlocks; ++j) {
      const float step = d * block.scales[j];
      if (step == 0) continue;
      for (int i = 0; i < kSubBlockSize; ++i) {
        const int l = nearest_int(x[kSubBlockSize * j + i] / step);
        codes[kSubBlockSize * j + i] =
            static_cast<uint8_t>((l < -32 ? -32 : (l > 31 ? 31 : l)) + kCodeOffset);
      }
    }
    pack_codes(codes, block);
  }
}

}  // namespace moetier::types
