#version 450
// f32 activation rows → the activation type of a weight type's dot product, rounded
// exactly like the CPU (src/tensor/types/q8_k.cpp, q8_0.cpp, fp16.cpp), so GPU matmuls see
// the same int8 codes and scales as CPU ones. One workgroup per row.
//   ACT_Q8_K: blocks of 256: m = the element of largest magnitude (first on ties),
//             s = -127 / m, q = min(127, round_half_even(s·x)), d = 1 / s, bsums of 16.
//   ACT_Q8_0: blocks of 32: a = max|x|, d = fp16(a / 127), q = round_half_even(x · (127 / a)).
//   ACT_F16 / ACT_BF16: round to nearest even.
// Output rows are y_stride bytes apart (a multiple of 4).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_in;      // elements per row
  uint n_rows;
  uint x_stride;  // floats between input rows
  uint y_stride;  // bytes between output rows
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

#if defined(ACT_Q8_K)
#define QX x
#define QY_K y
#elif defined(ACT_Q8_0)
#define QX x
#define QY_0 y
#endif
#include "quantize_row.glsl"

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint xb = row * p.x_stride;
  const uint yw = row * (p.y_stride >> 2u);  // first word of the output row
#if defined(ACT_Q8_K)
  quantize_row_q8_k(xb, yw, p.n_in, t);
#elif defined(ACT_Q8_0)
  quantize_row_q8_0(xb, yw, p.n_in, t);
#elif defined(ACT_F16) || defined(ACT_BF16)
  for (uint i = t; i < p.n_in / 2u; i += 64u) {
#if defined(ACT_F16)
    y[yw + i] = f32_to_f16(x[xb + 2u * i]) | (f32_to_f16(x[xb + 2u * i + 1u]) << 16u);
#else
    y[yw + i] = f32_to_bf16(x[xb + 2u * i]) | (f32_to_bf16(x[xb + 2u * i + 1u]) << 16u);
#endif
  }
#endif
}
