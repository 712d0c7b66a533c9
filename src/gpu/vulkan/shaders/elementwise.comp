#version 450
// Element-wise ops on rows. EW_ADD: x += y. EW_SILU_MUL: out = silu(gate) · up (SwiGLU, the
// CPU's cpu::silu(g) · u). EW_COPY_ROWS: out row r = x row r (strided gather).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;          // elements per row
  uint n_rows;
  uint a_stride, b_stride, out_stride;  // floats between rows
  uint a_offset, b_offset, out_offset;  // floats before row 0
} p;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Out { float o[]; };

void main() {
  const uint i = group_index() * 64u + gl_LocalInvocationID.x;
  if (i >= p.n * p.n_rows) return;
  const uint r = i / p.n, c = i % p.n;
#if defined(EW_ADD)
  precise float s = a[p.a_offset + r * p.a_stride + c] + b[p.b_offset + r * p.b_stride + c];
  a[p.a_offset + r * p.a_stride + c] = s;
#elif defined(EW_SILU_MUL)
  precise float s = silu(a[p.a_offset + r * p.a_stride + c]) * b[p.b_offset + r * p.b_stride + c];
  o[p.out_offset + r * p.out_stride + c] = s;
#elif defined(EW_COPY_ROWS)
  o[p.out_offset + r * p.out_stride + c] = a[p.a_offset + r * p.a_stride + c];
#endif
}
