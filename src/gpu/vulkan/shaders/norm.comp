#version 450
// Per-(row, head) normalisation of vectors of n elements, the CPU's cpu::rms_norm /
// cpu::l2_norm (src/cpu/ops.cpp): the sum of squares is carried in float-float (≈ the CPU's
// double), then
//   RMS: out = x · (1 / sqrt(Σx²/n + eps)) · w        L2: out = x · (1 / max(sqrt(Σx²), eps))
// Vector (row r, head h) starts at r·row_stride + h·head_stride (out: the out_* strides).
// One workgroup per vector; may run in place (x and out the same buffer).
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
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) buffer Out { float o[]; };

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
}
