#version 450
// NEOX rotary embedding in place, the CPU's cpu::rope_neox_with: pairs (i, i + n_rot/2) of
// each head rotated by the angles of the row's position. The cos/sin table is computed on the
// CPU in double (cpu::rope_angles) and uploaded, so both backends rotate by the same floats.
// One invocation per (row, head, pair).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_rows, n_heads, head_stride, row_stride, n_rot;
} p;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer CosSin { float cs[]; };  // [row][n_rot/2][cos, sin]

void main() {
  const uint half_ = p.n_rot / 2u;
  const uint i = group_index() * 64u + gl_LocalInvocationID.x;
  if (i >= p.n_rows * p.n_heads * half_) return;
  const uint pair = i % half_, head = (i / half_) % p.n_heads, row = i / (half_ * p.n_heads);
  const uint b = row * p.row_stride + head * p.head_stride;
  const float c = cs[(row * half_ + pair) * 2u], s = cs[(row * half_ + pair) * 2u + 1u];
  const float a = x[b + pair], bb = x[b + pair + half_];
  precise float r0 = a * c - bb * s;
  precise float r1 = a * s + bb * c;
  x[b + pair] = r0;
  x[b + pair + half_] = r1;
}
