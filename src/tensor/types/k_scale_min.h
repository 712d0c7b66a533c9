// Pieces shared by Q4_K and Q5_K (types/q4_k.cpp, types/q5_k.cpp; defined in k_scale_min.cpp): both store a 256-value
// super-block as 8 sub-blocks of 32 with an affine code x = d * sc[j] * q - dmin * m[j],
// where sc[j] and m[j] are 6-bit integers packed into 12 bytes.
//
// Floating-point expressions below are written in a fixed evaluation order on purpose:
// ggml's reference quantizers use the same order, and keeping it makes our blocks
// byte-identical to theirs (the project never enables -ffast-math or FMA contraction in
// these files, so the compiler keeps the order too).
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/quant_util.h"

namespace moetier::types::kquant {

inline constexpr int kSubBlocks = kQK_K / 32;   // 8 sub-blocks per super-block
inline constexpr int kSubBlockSize = 32;
inline constexpr int kSixBitMax = 63;           // largest packed scale / min

// The 12-byte packing of eight 6-bit scales sc[0..7] and eight 6-bit mins m[0..7]:
//   bytes 0..3  : sc[0..3] in bits 0-5, bits 6-7 = high 2 bits of sc[4..7]
//   bytes 4..7  : m[0..3]  in bits 0-5, bits 6-7 = high 2 bits of m[4..7]
//   bytes 8..11 : low 4 bits of sc[4..7] in bits 0-3, low 4 bits of m[4..7] in bits 4-7
struct ScaleMin {
  uint8_t scale;  // 0..63
  uint8_t min;    // 0..63
};

inline ScaleMin unpack_scale_min(const uint8_t packed[kKScaleSize], int sub_block) {
  const int j = sub_block;
  if (j < 4) {
    return {static_cast<uint8_t>(packed[j] & 0x3F), static_cast<uint8_t>(packed[j + 4] & 0x3F)};
  }
  const uint8_t low_bits = packed[j + 4];  // byte 8..11
  const uint8_t scale = (low_bits & 0x0F) | ((packed[j - 4] >> 6) << 4);
  const uint8_t min = (low_bits >> 4) | ((packed[j] >> 6) << 4);
  return {scale, min};
}

// scales and mins must be in [0, 63].
inline void pack_scales_mins(const uint8_t scales[kSubBlocks], const uint8_t mins[kSubBlocks],
                             uint8_t packed[kKScaleSize]) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
  }
}

// The trial grid of fit_scale_and_min: trial k (0..n_trials) maps the range of x onto
// max_level + first_extra + k * extra_step levels before clipping, so some trials clip
// the extremes in exchange for a finer step.
struct AffineSearch {
  int max_level;      // codes are 0..max_level (15 for Q4_K, 31 for Q5_K)
  float first_extra;  // levels added to max_level in trial 0 (negative: coarser)
  float extra_step;   // levels added per further trial
  int n_trials;       // trials k = 0..n_trials after the initial min/max fit
};

struct AffineFit {
  float scale;  // >= 0; x ≈ scale * q - min
  float min;    // >= 0 (the code can only subtract an offset)
};

// Fits x[0..n) ≈ scale * q[i] - min with integer q[i] in [0, max_level], minimising the
// weighted squared error sum w[i] * (scale * q[i] - min - x[i])^2. Starts from the plain
// min/max mapping, then for each trial grid rounds x onto it and solves the 2x2 weighted
// least-squares problem for (scale, offset) given those codes; keeps the best. The offset
// is forced <= 0 (the format stores -min), refitting the scale alone when it would not be.
// Trials map [origin, hi] onto their levels, where origin starts at min(lo, 0) and moves
// to the best offset found so far (ggml's reference quantizer does the same; following it
// keeps the codes byte-identical).
// codes: out, n values; scratch: n bytes of workspace.
inline AffineFit fit_scale_and_min(const float* x, const float* w, int n, const AffineSearch& search,
                                   uint8_t* codes, uint8_t* scratch) {
  float lo = x[0];
  float hi = x[0];
  float sum_w = w[0];
  float sum_wx = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_wx += w[i] * x[i];
  }
  if (lo > 0) lo = 0;  // the offset can only lower values: map 0 to code 0 at best
  if (hi == lo) {      // constant non-positive sub-block: only the offset carries it
    for (int i = 0; i < n; ++i) codes[i] = 0;
    return {.scale = 0.0f, .min = -lo};
  }
  const int top = search.max_level;
  auto clamp_code = [top](int q) { return q < 0 ? 0 : (q > top ? top : q); };

  // Initial fit: lo -> 0, hi -> top.
  float inv_step = top / (hi - lo);
  float best_scale = 1 / inv_step;
  float best_offset = lo;  // the additive term, <= 0
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = clamp_code(nearest_int(inv_step * (x[i] - lo)));
    codes[i] = static_cast<uint8_t>(q);
    const float diff = best_scale * q + lo - x[i];
    best_err += w[i] * (diff * diff);
  }

  for (int k = 0; k <= search.n_trials; ++k) {
    const float origin = best_offset;
    inv_step = (search.first_extra + search.extra_step * k + top) / (hi - origin);
    float sum_wq = 0, sum_wq2 = 0, sum_wqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clamp_code(nearest_int(inv_step * (x[i] - origin)));
      scratch[i] = static_cast<uint8_t>(q);
      sum_wq += w[i] * q;
      sum_wq2 += w[i] * q * q;
      sum_wqx += w[i] * q * x[i];
    }
    // Normal equations of min over (s, b) of sum w (s q + b - x)^2.
    const float det = sum_w * sum_wq2 - sum_wq * sum_wq;
    if (!(det > 0)) continue;  // all codes equal: the trial says nothing
    float scale = (sum_w * sum_wqx - sum_wx * sum_wq) / det;
    float offset = (sum_wq2 * sum_wx - sum_wq * sum_wqx) / det;
    if (offset > 0) {
      offset = 0;
      scale = sum_wqx / sum_wq2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * scratch[i] + offset - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best_err) {
      for (int i = 0; i < n; ++i) codes[i] = scratch[i];
      best_err = err;
      best_scale = scale;
      best_offset = offset;
    }
  }
  return {.scale = best_scale, .min = -best_offset};
}

// Quantizes one 256-value super-block x into the common Q4_K/Q5_K header (d, dmin, packed
// 6-bit scales/mins) and returns the final codes q[0..255] in [0, max_level]:
//  1. per sub-block, importance w = rms(sub-block) + |x| (favours large values) and a
//     fitted (scale, min);
//  2. d = max scale / 63 and dmin = max min / 63 (stored as fp16); each sub-block keeps
//     round(scale / d) and round(min / dmin) as 6-bit integers;
//  3. codes are recomputed against the scales as stored (after 6-bit and fp16 rounding).
// A sub-block whose stored scale is 0 keeps its step-1 codes (they do not affect values).
struct KHeader {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleSize];
};

KHeader quantize_k_super_block(const float* x, const AffineSearch& search, uint8_t codes[kQK_K]);

}  // namespace moetier::types::kquant
