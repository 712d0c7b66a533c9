#include "core/cpu_features.h"
#include "tensor/fp16.h"

namespace moetier {

void fp16_to_f32_row(const uint16_t* in, float* out, int64_t n) {
  if (cpu_features().has_avx2_set()) return f16c::fp16_to_f32_row(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(in[i]);
}

void f32_to_fp16_row(const float* in, uint16_t* out, int64_t n) {
  if (cpu_features().has_avx2_set()) return f16c::f32_to_fp16_row(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_fp16(in[i]);
}

}  // namespace moetier
