// Q4_0: blocks of 32, x = d * (q - 8) with q a 4-bit code; d is an fp16.
//
// The quantizer reproduces ggml's reference (quantize_row_q4_0_ref) bit for bit: the
// element of largest magnitude m (with its sign) defines d = m / -8, so that element lands
// exactly on code 0 (value -8 * d = m) and the other codes cover [-8, 7] * d. Each value is
// then placed at floor(x / d + 8.5), i.e. rounded to nearest with ties up, clamped to 15.
// The codes are chosen with the unrounded d; only the stored d is rounded to fp16.
#include <algorithm>

#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_util.h"
#include "tensor/types/types.h"

namespace moetier::types {
namespace {

constexpr int kHalfBlock = kQK4_0 / 2;  // qs[j] holds elements j and j + 16

// Code for x / d (scaled = x * (1 / d)), in [0, 15]. Written without an out-of-range float to
// int conversion, so a NaN input gives code 0 instead of undefined behaviour.
uint8_t code_for(float scaled) {
  const float shifted = scaled + 8.5f;
  if (shifted >= 15.0f) return 15;
  if (!(shifted > 0.0f)) return 0;
  return static_cast<uint8_t>(shifted);  // truncation == floor for a positive value
}

}  // namespace

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  const int64_t n_blocks = n / kQK4_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_0& block = blocks[b];
    const float d = fp16_to_f32(block.d);
    float* out = dst + b * kQK4_0;
    for (int j = 0; j < kHalfBlock; ++j) {
      out[j] = static_cast<float>((block.qs[j] & 0x0F) - 8) * d;
      out[j + kHalfBlock] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  const int64_t n_blocks = n / kQK4_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQK4_0;
    const SignedMax extreme = signed_absmax(x, kQK4_0);
    const float d = extreme.value / -8.0f;
    const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0& block = blocks[b];
    block.d = f32_to_fp16(d);
    for (int j = 0; j < kHalfBlock; ++j) {
      const uint8_t low = code_for(x[j] * inverse_d);
      const uint8_t high = code_for(x[j + kHalfBlock] * inverse_d);
      block.qs[j] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

}  // namespace moetier::types
