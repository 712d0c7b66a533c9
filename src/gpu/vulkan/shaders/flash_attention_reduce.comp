#version 450
// Merges the split-K partials of flash_attention.comp (FA_SPLIT) into the attention output:
// for row r and head h, over the chunks c that row can see (c · chunk_keys ≤ pos0 + r),
//   M = max_c m_c,  w_c = exp2(m_c − M),  o = Σ_c w_c · o_c / Σ_c w_c · l_c,
// then o · sigmoid(gate) when the model gates its attention output (the m_c are in log2
// units, as the main kernel keeps them). One workgroup per (row, head); invocation t owns
// the vec4s t, t + WG, ... of the head vector.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 128;

const uint WG = gl_WorkGroupSize.x;
const uint HV = HD / 4u;

layout(push_constant) uniform Push {
  uint n_head;
  uint n_rows;
  uint pos0;
  uint row_base;
  uint chunk_keys;
  uint n_chunks;
  uint has_gate;
  uint gate_row_stride, gate_head_stride, gate_offset;  // floats, in the gate buffer
} p;

layout(std430, binding = 0) readonly buffer PO { vec4 part_o[]; };   // [chunk][row][n_head][HD]
layout(std430, binding = 1) readonly buffer PML { vec2 part_ml[]; }; // [chunk][row][n_head]: (m, l)
layout(std430, binding = 2) writeonly buffer O { vec4 out4[]; };     // [row][n_head][HD]
layout(std430, binding = 3) readonly buffer G { float gate[]; };

void main() {
  const uint rh = group_index();
  if (rh >= p.n_rows * p.n_head) return;
  const uint t = gl_LocalInvocationIndex;
  const uint r = rh / p.n_head, h = rh % p.n_head;
  const uint n_seen = min(p.n_chunks, (p.pos0 + r) / p.chunk_keys + 1u);
  const uint stride = p.n_rows * p.n_head;  // slots per chunk

  float m_max = part_ml[rh].x;
  for (uint c = 1u; c < n_seen; ++c) m_max = max(m_max, part_ml[c * stride + rh].x);
  float l = 0.0;
  for (uint c = 0u; c < n_seen; ++c) {
    const vec2 ml = part_ml[c * stride + rh];
    l += exp2(ml.x - m_max) * ml.y;
  }
  const float inv_l = 1.0 / l;
  const uint out_base = ((p.row_base + r) * p.n_head + h) * HV;
  const uint g_base = p.gate_offset + (p.row_base + r) * p.gate_row_stride + h * p.gate_head_stride;
  for (uint v = t; v < HV; v += WG) {
    vec4 o = vec4(0.0);
    for (uint c = 0u; c < n_seen; ++c) o += exp2(part_ml[c * stride + rh].x - m_max) * part_o[(c * stride + rh) * HV + v];
    o *= inv_l;
    if (p.has_gate != 0u) {
      const uint gi = g_base + 4u * v;
      o *= vec4(sigmoid(gate[gi]), sigmoid(gate[gi + 1u]), sigmoid(gate[gi + 2u]), sigmoid(gate[gi + 3u]));
    }
    out4[out_base + v] = o;
  }
}
