// Scalar reference row conversions, one pair per type; each type's pair lives in its own
// translation unit (types/<type>.cpp). n is the number of elements in the row, a multiple
// of the type's block size. Registered in type_ops.cpp.
#pragma once

#include <cstdint>

namespace moetier::types {

#define MOETIER_DECLARE_TYPE(t)                                     \
  void dequantize_row_##t(const void* src, float* dst, int64_t n); \
  void quantize_row_##t(const float* src, void* dst, int64_t n);

MOETIER_DECLARE_TYPE(f32)
MOETIER_DECLARE_TYPE(f16)
MOETIER_DECLARE_TYPE(bf16)
MOETIER_DECLARE_TYPE(q4_0)
MOETIER_DECLARE_TYPE(q8_0)
MOETIER_DECLARE_TYPE(q4_k)
MOETIER_DECLARE_TYPE(q5_k)
MOETIER_DECLARE_TYPE(q6_k)
MOETIER_DECLARE_TYPE(q8_k)
MOETIER_DECLARE_TYPE(iq4_xs)

#undef MOETIER_DECLARE_TYPE

}  // namespace moetier::types
