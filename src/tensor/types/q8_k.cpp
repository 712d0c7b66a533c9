// Q8_K: blocks of 256, x = d * q with q an int8 and d an f32, plus bsums[j] = the sum of the
// 16 codes of group j (the K-quant dot products use it to apply sub-block minimums with
// one multiply per group instead of one per element).
//
// This is the activation type of K-quant and IQ4_XS products, and llama.cpp's CPU backend
// quantizes activations with exactly this rounding on every ISA, which later logits
// comparisons rely on:
//   m = the element of largest magnitude with its sign (first one on ties),
//   s = -127 / m (f32), q = min(127, round_half_even(s * x)), d = 1 / s.
// The element m itself maps to -127 and every other |s * x| <= 127 up to an ulp of s, so
// the min(127, .) is only a guard that keeps the code inside int8.
#include <algorithm>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/quant_util.h"
#include "tensor/types/types.h"

namespace moetier::types {
namespace {

constexpr int kGroup = 16;  // elements per bsums entry

}  // namespace

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  const int64_t n_blocks = n / kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    float* out = dst + b * kQK_K;
    for (int j = 0; j < kQK_K; ++j) out[j] = blocks[b].d * static_cast<float>(blocks[b].qs[j]);
  }
}

void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  const int64_t n_blocks = n / kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQK_K;
    BlockQ8_K& block = blocks[b];
    const SignedMax extreme = signed_absmax(x, kQK_K);
    if (extreme.magnitude == 0.0f) {
      block.d = 0.0f;
      std::memset(block.qs, 0, sizeof(block.qs));
      std::memset(block.bsums, 0, sizeof(block.bsums));
      continue;
    }
    const float inverse_scale = -127.0f / extreme.value;
    for (int j = 0; j < kQK_K; ++j) {
      block.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(inverse_scale * x[j])));
    }
    for (int g = 0; g < kQK_K / kGroup; ++g) {
      int sum = 0;
      for (int j = 0; j < kGroup; ++j) sum += block.qs[g * kGroup + j];
      block.bsums[g] = static_cast<int16_t>(sum);
    }
    block.d = 1.0f / inverse_scale;
  }
}

}  // namespace moetier::types
