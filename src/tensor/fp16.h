// IEEE half and bfloat16 <-> float, bit-exact with ggml's scalar conversions
// (round to nearest even; bf16 from NaN keeps a quiet NaN).
#pragma once

#include <cstdint>

namespace moetier {

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

}  // namespace moetier
