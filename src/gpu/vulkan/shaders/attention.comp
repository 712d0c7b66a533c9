#version 450
// Causal softmax attention of query rows against one sequence's KV cache, the CPU's
// attention_block (src/model/blocks/attention.cpp): for row r at position pos0 + r and query
// head h (reading KV head h / (n_head / n_head_kv)):
//   s_p = (q · k_p) · scale for p ≤ pos, softmax (max-subtracted, sum in float-float ≈ the
//   CPU's double, multiplied by float(1 / sum)), o = Σ_p s_p · v_p in order p = 0, 1, …,
//   then o · sigmoid(gate) when the model gates its attention output.
// One workgroup per (row, head). Scores go to a scratch buffer ([row][head][max_keys]).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint hd, n_head, n_head_kv;
  uint n_rows, pos0;
  uint max_keys;      // stride of a (row, head) in the score scratch
  float scale;
  uint k_type, v_type;          // cache types: 0 f32, 1 f16, 2 q8_0, 3 q4_0
  uint k_row_bytes, v_row_bytes;
  uint has_gate;
  uint gate_row_stride, gate_head_stride, gate_offset;  // floats, in the gate buffer
  uint row_base;      // q, o and gate rows of this sequence start at this micro-batch row
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };      // [row][n_head][hd]
layout(std430, binding = 1) readonly buffer K { uint kc[]; };      // cache rows [pos][n_head_kv·hd]
layout(std430, binding = 2) readonly buffer V { uint vc[]; };
layout(std430, binding = 3) buffer Scores { float sc[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };    // [row][n_head][hd]
layout(std430, binding = 5) readonly buffer G { float gate[]; };

shared float s_max[64];
shared vec2 s_sum[64];

vec2 ff_add(vec2 a, vec2 b) {
  vec2 s = two_sum(a.x, b.x);
  precise float lo = s.y + a.y + b.y;
  return two_sum(s.x, lo);
}

// Element e of cache row pos, decoded like the CPU's load (dequantize_row_q8_0 / _q4_0:
// float(q) · d).
#define CACHE_AT(name, buf, TYPE, ROW_BYTES)                                         \
  float name(uint pos, uint e) {                                                     \
    const uint rb = pos * ROW_BYTES;                                                 \
    if (TYPE == 0u) return uintBitsToFloat(buf[(rb >> 2u) + e]);                     \
    if (TYPE == 1u) return f16_to_f32(U16_AT(buf, rb + 2u * e));                     \
    const uint b = e / 32u, j = e % 32u;                                             \
    if (TYPE == 2u) {                                                                \
      const uint o = rb + b * 34u;                                                   \
      return float(sext8(BYTE_AT(buf, o + 2u + j))) * f16_to_f32(U16_AT(buf, o));    \
    }                                                                                \
    const uint o = rb + b * 18u;                                                     \
    const uint q = BYTE_AT(buf, o + 2u + (j % 16u));                                 \
    return float(int(j < 16u ? q & 0x0Fu : q >> 4u) - 8) * f16_to_f32(U16_AT(buf, o)); \
  }
CACHE_AT(k_at, kc, p.k_type, p.k_row_bytes)
CACHE_AT(v_at, vc, p.v_type, p.v_row_bytes)

void main() {
  const uint g = group_index();
  if (g >= p.n_rows * p.n_head) return;
  const uint t = gl_LocalInvocationID.x;
  const uint row = g / p.n_head, h = g % p.n_head;
  const uint kvh = h / (p.n_head / p.n_head_kv);
  const uint n_keys = p.pos0 + row + 1u;
  const uint qb = ((p.row_base + row) * p.n_head + h) * p.hd;
  const uint sb = g * p.max_keys;

  float mx = -3.402823466e38;
  for (uint k = t; k < n_keys; k += 64u) {
    vec2 acc = vec2(0.0);
    for (uint i = 0u; i < p.hd; ++i) acc = ff_add(acc, two_prod(q[qb + i], k_at(k, kvh * p.hd + i)));
    precise float s = (acc.x + acc.y) * p.scale;
    sc[sb + k] = s;
    mx = max(mx, s);
  }
  s_max[t] = mx;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) s_max[t] = max(s_max[t], s_max[t + s]);
    barrier();
  }
  mx = s_max[0];
  vec2 part = vec2(0.0);
  for (uint k = t; k < n_keys; k += 64u) {
    const float e = exp(sc[sb + k] - mx);
    sc[sb + k] = e;
    part = ff_add(part, vec2(e, 0.0));
  }
  s_sum[t] = part;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) s_sum[t] = ff_add(s_sum[t], s_sum[t + s]);
    barrier();
  }
  const float inv = div_rn(1.0, s_sum[0].x + s_sum[0].y);
  memoryBarrierBuffer();
  barrier();
  for (uint c = t; c < p.hd; c += 64u) {
    float acc = 0.0;
    for (uint k = 0u; k < n_keys; ++k) {
      precise float w = sc[sb + k] * inv;
      precise float prod = w * v_at(k, kvh * p.hd + c);
      precise float sum = acc + prod;
      acc = sum;
    }
    if (p.has_gate != 0u) {
      precise float gated =
          acc * sigmoid(gate[p.gate_offset + (p.row_base + row) * p.gate_row_stride + h * p.gate_head_stride + c]);
      acc = gated;
    }
    o[qb + c] = acc;
  }
}
