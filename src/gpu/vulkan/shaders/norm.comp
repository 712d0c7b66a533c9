#version 450
// Per-(row, head) normalisation of vectors of n elements, the CPU's cpu::rms_norm /
// cpu::l2_norm (src/cpu/ops.cpp): the sum of squares is carried in float-float (≈ the CPU's
// double), then
//   RMS: out = x · (1 / sqrt(Σx²/n + eps)) · w        L2: out = x · (1 / max(sqrt(Σx²), eps))
// Vector (row r, head h) starts at r·row_stride + h·head_stride (out: the out_* strides).
// One workgroup per vector; may run in place (x and out the same buffer).
// NORM_RMS_QUANT (whole rows, n_heads = 1): the output row is also converted to the CPU's
// Q8_K (binding 3) and/or Q8_0 (binding 4) activation blocks, exactly as quantize.comp
// would convert it afterwards (quantize_row.glsl on the f32 values just written): the block
// input's conversions come with its norm, one dispatch instead of two or three.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;
  uint n_heads;
  uint head_stride, row_stride;
  uint out_head_stride, out_row_stride;
  uint n_vectors;  // rows · heads
  float eps;
  uint has_weight;
  uint quant;                  // NORM_RMS_QUANT: bit 0 Q8_K, bit 1 Q8_0
  uint q8k_stride, q80_stride; // NORM_RMS_QUANT: bytes between converted rows
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
#if defined(NORM_RMS_QUANT)
layout(std430, binding = 2) coherent buffer Out { float o[]; };  // read back by the workgroup
layout(std430, binding = 3) writeonly buffer YK { uint yk[]; };
layout(std430, binding = 4) writeonly buffer Y0 { uint y0[]; };
#define QX o
#define QY_K yk
#define QY_0 y0
#include "quantize_row.glsl"
#else
layout(std430, binding = 2) buffer Out { float o[]; };
#endif

shared vec2 s_sum[64];

vec2 ff_add(vec2 a, vec2 b) {
  vec2 s = two_sum(a.x, b.x);
  precise float lo = s.y + a.y + b.y;
  return two_sum(s.x, lo);
}

void main() {
  const uint v = group_index();
  if (v >= p.n_vectors) return;
  const uint t = gl_LocalInvocationID.x;
  const uint row = v / p.n_heads, head = v % p.n_heads;
  const uint xb = row * p.row_stride + head * p.head_stride;
  const uint ob = row * p.out_row_stride + head * p.out_head_stride;
  vec2 acc = vec2(0.0);
  for (uint i = t; i < p.n; i += 64u) acc = ff_add(acc, two_prod(x[xb + i], x[xb + i]));
  s_sum[t] = acc;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) s_sum[t] = ff_add(s_sum[t], s_sum[t + s]);
    barrier();
  }
  const vec2 sum = s_sum[0];
  float scale;
#if defined(NORM_L2)
  scale = 1.0 / max(sqrt(sum.x + sum.y), p.eps);
#else
  const float mean = div_rn(sum.x, float(p.n)) + sum.y / float(p.n);
  scale = 1.0 / sqrt(mean + p.eps);
#endif
  for (uint i = t; i < p.n; i += 64u) {
    precise float y = x[xb + i] * scale;
    if (p.has_weight != 0u) y = y * w[i];
    o[ob + i] = y;
  }
#if defined(NORM_RMS_QUANT)
  memoryBarrierBuffer();
  barrier();
  if ((p.quant & 1u) != 0u) quantize_row_q8_k(ob, v * (p.q8k_stride >> 2u), p.n, t);
  if ((p.quant & 2u) != 0u) quantize_row_q8_0(ob, v * (p.q80_stride >> 2u), p.n, t);
#endif
}
