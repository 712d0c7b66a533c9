// IQ4_XS: super-blocks of 256 = 8 sub-blocks of 32. Element i of sub-block s decodes to
//   x = d * (ls[s] - 32) * kIQ4NLValues[q_i]
// with d an fp16, ls a 6-bit unsigned sub-block scale (so the signed multiplier is in
// [-32, 31]) and q_i a 4-bit index into the non-linear grid of blocks.h.
// Packing: scales_l[s / 2] holds the low 4 bits of ls[s] (even s in the low nibble),
// scales_h holds the high 2 bits (bits 2s, 2s+1); qs[16 s + j] holds element j of sub-block s
// in its low nibble and element j + 16 in its high nibble.
//
// Quantizer (no importance matrix). Notation: w_i are per-element weights of the squared
// error; E(scale, indices) = sum_i w_i (x_i - scale * grid[q_i])^2.
//  1. Each sub-block gets a real-valued scale: try inverse scales that put the
//     largest-magnitude element on or near either end of the grid (-127 or 113), assign every
//     element to its nearest grid value, and take the least-squares scale for that
//     assignment, sum(w q x) / sum(w q^2). Keep the one with the smallest E.
//  2. The super-block scale d makes the largest sub-block scale land on the 6-bit extreme
//     -32 (or +31; both are tried). Stored as fp16, and the fp16 value is the one used next.
//  3. Each sub-block picks the 6-bit multiplier among the nearest integer to scale / d and
//     its two neighbours, by E after re-assigning the indices with that exact multiplier.
// Steps 2-3 work with the scale the decoder will really see, which makes up for the
// rounding of d and of the 6-bit multipliers that a plain "round each scale" loses.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_util.h"
#include "tensor/types/types.h"

namespace moetier::types {
namespace {

constexpr int kSubLen = 32;
constexpr int kSubBlocks = kQK_K / kSubLen;
constexpr int kGridSize = 16;
constexpr int kScaleBias = 32;  // stored ls = multiplier + 32, multiplier in [-32, 31]
constexpr int kMinMultiplier = -32;
constexpr int kMaxMultiplier = 31;
// Inverse scales tried per grid end in step 1: the extreme element maps to end +- k, k <= 7
// grid units (the grid's steps are 10..24 units, so this sweeps about half a cell each way).
constexpr int kTriesPerSide = 7;
// Below this a sub-block is treated as all-zero (scale 0): avoids dividing by denormals.
constexpr float kTinyMagnitude = 1e-15f;

// Decision thresholds between neighbouring grid values.
constexpr std::array<float, kGridSize - 1> make_midpoints() {
  std::array<float, kGridSize - 1> mid{};
  for (int i = 0; i + 1 < kGridSize; ++i) mid[i] = 0.5f * (kIQ4NLValues[i] + kIQ4NLValues[i + 1]);
  return mid;
}
constexpr std::array<float, kGridSize - 1> kMidpoints = make_midpoints();

// Index of the grid value nearest to v (in grid units): the number of thresholds below v,
// found by a 4-step binary search. A NaN lands on index 0.
int nearest_grid_index(float v) {
  int index = v > kMidpoints[7] ? 8 : 0;
  index += v > kMidpoints[index + 3] ? 4 : 0;
  index += v > kMidpoints[index + 1] ? 2 : 0;
  index += v > kMidpoints[index] ? 1 : 0;
  return index;
}

// Weighted error of representing x with `scale * grid[nearest]`; fills `indices` if given.
float assignment_error(const float* x, const float* w, float scale, uint8_t* indices) {
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  float error = 0.0f;
  for (int i = 0; i < kSubLen; ++i) {
    const int q = nearest_grid_index(x[i] * inverse);
    if (indices) indices[i] = static_cast<uint8_t>(q);
    const float diff = x[i] - scale * static_cast<float>(kIQ4NLValues[q]);
    error += w[i] * diff * diff;
  }
  return error;
}

// Step 1: the real-valued scale of one sub-block (0 when it is all ~zero).
float fit_sub_block_scale(const float* x, const float* w) {
  const SignedMax extreme = signed_absmax(x, kSubLen);
  if (extreme.magnitude < kTinyMagnitude) return 0.0f;
  float best_scale = 0.0f;
  float best_gain = 0.0f;  // E = sum(w x^2) - gain, so the largest gain wins
  const float grid_ends[2] = {static_cast<float>(kIQ4NLValues[0]),
                              static_cast<float>(kIQ4NLValues[kGridSize - 1])};
  for (const float end : grid_ends) {
    for (int k = -kTriesPerSide; k <= kTriesPerSide; ++k) {
      const float inverse = (end + static_cast<float>(k)) / extreme.value;
      float sum_qx = 0.0f;
      float sum_qq = 0.0f;
      for (int i = 0; i < kSubLen; ++i) {
        const float q = kIQ4NLValues[nearest_grid_index(x[i] * inverse)];
        sum_qx += w[i] * q * x[i];
        sum_qq += w[i] * q * q;
      }
      if (sum_qq <= 0.0f) continue;
      const float gain = sum_qx * sum_qx / sum_qq;
      if (gain > best_gain) {
        best_gain = gain;
        best_scale = sum_qx / sum_qq;
      }
    }
  }
  return best_scale;
}

// Steps 2-3 for one super-block scale candidate. Returns the total weighted error and fills
// the chosen multipliers and indices.
float encode_with_super_scale(const float* x, const float* w, const float* sub_scales, float d,
                              int* multipliers, uint8_t* indices) {
  float total_error = 0.0f;
  for (int s = 0; s < kSubBlocks; ++s) {
    const float* xs = x + s * kSubLen;
    const float* ws = w + s * kSubLen;
    const int nearest = d != 0.0f ? std::clamp(nearest_int(sub_scales[s] / d), kMinMultiplier, kMaxMultiplier) : 0;
    float best_error = INFINITY;
    int best_multiplier = nearest;
    for (int m = std::max(kMinMultiplier, nearest - 1); m <= std::min(kMaxMultiplier, nearest + 1); ++m) {
      const float error = assignment_error(xs, ws, d * static_cast<float>(m), nullptr);
      if (error < best_error) {
        best_error = error;
        best_multiplier = m;
      }
    }
    multipliers[s] = best_multiplier;
    total_error += assignment_error(xs, ws, d * static_cast<float>(best_multiplier), indices + s * kSubLen);
  }
  return total_error;
}

void pack_block(float d, const int* multipliers, const uint8_t* indices, BlockIQ4_XS& block) {
  block.d = f32_to_fp16(d);
  block.scales_h = 0;
  std::memset(block.scales_l, 0, sizeof(block.scales_l));
  for (int s = 0; s < kSubBlocks; ++s) {
    const int stored = multipliers[s] + kScaleBias;  // 0..63
    block.scales_l[s / 2] |= static_cast<uint8_t>((stored & 0x0F) << (4 * (s % 2)));
    block.scales_h |= static_cast<uint16_t>((stored >> 4) << (2 * s));
    const uint8_t* q = indices + s * kSubLen;
    uint8_t* packed = block.qs + s * (kSubLen / 2);
    for (int j = 0; j < kSubLen / 2; ++j) packed[j] = static_cast<uint8_t>(q[j] | (q[j + kSubLen / 2] << 4));
  }
}

void quantize_super_block(const float* x, BlockIQ4_XS& block) {
  // Weights x^2: without an importance matrix, large weights are taken to matter more (the
  // same choice ggml makes); the error of near-zero elements matters little to a dot product.
  float w[kQK_K];
  for (int i = 0; i < kQK_K; ++i) w[i] = x[i] * x[i];

  float sub_scales[kSubBlocks];
  for (int s = 0; s < kSubBlocks; ++s) sub_scales[s] = fit_sub_block_scale(x + s * kSubLen, w + s * kSubLen);
  const SignedMax largest = signed_absmax(sub_scales, kSubBlocks);

  int multipliers[kSubBlocks] = {};
  uint8_t indices[kQK_K];
  if (largest.magnitude == 0.0f) {
    std::fill(std::begin(indices), std::end(indices), static_cast<uint8_t>(nearest_grid_index(0.0f)));
    pack_block(0.0f, multipliers, indices, block);
    return;
  }

  // The largest scale goes to multiplier -32 or +31; keep whichever encodes with less error.
  const float candidates[2] = {largest.value / static_cast<float>(kMinMultiplier),
                               largest.value / static_cast<float>(kMaxMultiplier)};
  float best_error = INFINITY;
  float best_d = 0.0f;
  int candidate_multipliers[kSubBlocks];
  uint8_t candidate_indices[kQK_K];
  for (const float candidate : candidates) {
    const float d = fp16_to_f32(f32_to_fp16(candidate));  // the value the decoder will use
    if (d == 0.0f || !std::isfinite(d)) continue;
    const float error = encode_with_super_scale(x, w, sub_scales, d, candidate_multipliers, candidate_indices);
    if (error < best_error) {
      best_error = error;
      best_d = d;
      std::copy(std::begin(candidate_multipliers), std::end(candidate_multipliers), multipliers);
      std::copy(std::begin(candidate_indices), std::end(candidate_indices), indices);
    }
  }
  if (!(best_error < INFINITY)) {  // every candidate under/overflowed fp16: store zeros
    std::fill(std::begin(indices), std::end(indices), static_cast<uint8_t>(nearest_grid_index(0.0f)));
    std::fill(std::begin(multipliers), std::end(multipliers), 0);
    best_d = 0.0f;
  }
  pack_block(best_d, multipliers, indices, block);
}

}  // namespace

void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  const int64_t n_blocks = n / kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockIQ4_XS& block = blocks[b];
    const float d = fp16_to_f32(block.d);
    for (int s = 0; s < kSubBlocks; ++s) {
      const int low = (block.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
      const int high = (block.scales_h >> (2 * s)) & 0x03;
      const float sub_scale = d * static_cast<float>((low | (high << 4)) - kScaleBias);
      const uint8_t* packed = block.qs + s * (kSubLen / 2);
      float* out = dst + b * kQK_K + s * kSubLen;
      for (int j = 0; j < kSubLen / 2; ++j) {
        out[j] = sub_scale * static_cast<float>(kIQ4NLValues[packed[j] & 0x0F]);
        out[j + kSubLen / 2] = sub_scale * static_cast<float>(kIQ4NLValues[packed[j] >> 4]);
      }
    }
  }
}

void quantize_row_iq4_xs(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  const int64_t n_blocks = n / kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) quantize_super_block(src + b * kQK_K, blocks[b]);
}

}  // namespace moetier::types
