// IEEE half and bfloat16 <-> float, bit-exact with ggml's scalar conversions
// (round to nearest even; bf16 from NaN keeps a quiet NaN).
#pragma once

#include <cstdint>

namespace moetier {

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

// Whole rows, bit-identical to the per-element functions; use F16C when the CPU has it
// (fp16_rows_avx2.cpp), the scalar loop otherwise.
void fp16_to_f32_row(const uint16_t* in, float* out, int64_t n);
void f32_to_fp16_row(const float* in, uint16_t* out, int64_t n);

namespace f16c {
// Only call when cpu_features().has_avx2_set() (tensor/fp16_rows_avx2.cpp).
void fp16_to_f32_row(const uint16_t* in, float* out, int64_t n);
void f32_to_fp16_row(const float* in, uint16_t* out, int64_t n);
}  // namespace f16c

}  // namespace moetier
