// Q8_0: blocks of 32, x = d * q with q an int8 in [-127, 127]; d is an fp16.
//
// Two quantizers, because ggml itself has two that differ in the last bit:
//  * quantize_row_q8_0 follows ggml's reference (quantize_row_q8_0_ref, what llama-quantize
//    writes into files): d = max|x| / 127, q = round_half_away(x * (1 / d)).
//  * quantize_row_q8_0_activations follows ggml's x86 CPU backend, which is what llama.cpp
//    uses for the activations of Q8_0 / Q4_0 matrix products: q = round_half_even(x * (127 /
//    max|x|)). 127 / a and 1 / (a / 127) can differ by an ulp, and ties round differently.
// In both the codes come from the unrounded d; only the stored d is rounded to fp16.
#include <cmath>

#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_util.h"
#include "tensor/types/activation_quant.h"
#include "tensor/types/types.h"

namespace moetier::types {
namespace {

float block_absmax(const float* x) {
  float absmax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) absmax = std::fmax(absmax, std::fabs(x[j]));
  return absmax;
}

}  // namespace

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  const int64_t n_blocks = n / kQK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = fp16_to_f32(blocks[b].d);
    float* out = dst + b * kQK8_0;
    for (int j = 0; j < kQK8_0; ++j) out[j] = static_cast<float>(blocks[b].qs[j]) * d;
  }
}

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  const int64_t n_blocks = n / kQK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQK8_0;
    const float d = block_absmax(x) / 127.0f;
    const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = f32_to_fp16(d);
    // |x * inverse_d| <= 127 up to an ulp, so the rounded value always fits an int8.
    for (int j = 0; j < kQK8_0; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::round(x[j] * inverse_d));
  }
}

void quantize_row_q8_0_activations(const float* src, BlockQ8_0* dst, int64_t n) {
  const int64_t n_blocks = n / kQK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQK8_0;
    const float absmax = block_absmax(x);
    dst[b].d = f32_to_fp16(absmax / 127.0f);
    const float multiplier = absmax != 0.0f ? 127.0f / absmax : 0.0f;
    for (int j = 0; j < kQK8_0; ++j) dst[b].qs[j] = static_cast<int8_t>(nearest_int(x[j] * multiplier));
  }
}

}  // namespace moetier::types
