// F32: the identity "quantization" (rows are copied), so every type can go through type_ops.
#include <cstring>

#include "tensor/types/types.h"

namespace moetier::types {

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace moetier::types
