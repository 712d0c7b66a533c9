// Scalar references for the plain float families. Products are accumulated in double:
// the reference should be at least as accurate as any SIMD variant it checks.
#include "core/status.h"
#include "cpu/dot.h"
#include "tensor/fp16.h"

namespace moetier::cpu::dot {

float f32_f32_scalar(int64_t n, const void* w, const void* a) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * y[i];
  return static_cast<float>(sum);
}

float f16_f16_scalar(int64_t n, const void* w, const void* a) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_f32(x[i])) * fp16_to_f32(y[i]);
  return static_cast<float>(sum);
}

float bf16_bf16_scalar(int64_t n, const void* w, const void* a) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_f32(x[i])) * bf16_to_f32(y[i]);
  return static_cast<float>(sum);
}

}  // namespace moetier::cpu::dot
