// F16: IEEE half per element, converted with the bit-exact scalar routines of fp16.h
// (round to nearest even, the same as ggml's fp32 -> fp16 row conversion).
#include "tensor/fp16.h"
#include "tensor/types/types.h"

namespace moetier::types {

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  const auto* halves = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(halves[i]);
}

void quantize_row_f16(const float* src, void* dst, int64_t n) {
  auto* halves = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) halves[i] = f32_to_fp16(src[i]);
}

}  // namespace moetier::types
