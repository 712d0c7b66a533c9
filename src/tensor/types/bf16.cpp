// BF16: the top 16 bits of an f32 per element; quantizing rounds to nearest even and keeps
// NaNs quiet, as ggml's reference row conversion does.
#include "tensor/fp16.h"
#include "tensor/types/types.h"

namespace moetier::types {

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* halves = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(halves[i]);
}

void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  auto* halves = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) halves[i] = f32_to_bf16(src[i]);
}

}  // namespace moetier::types
