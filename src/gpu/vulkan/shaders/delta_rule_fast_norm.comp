#version 450
// The gated RMSNorm after delta_rule_fast.comp, in place on y, one workgroup per (row, V
// head j) and one invocation per column c < DV:
//   y[c] = o[c] · rsqrt(mean_c(o²) + eps) · norm[c] · silu(z[c])
// with the mean over the head's DV outputs: a subgroup sum, then the subgroups' sums in
// order from shared memory (the same order in every invocation).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 0) in;               // = DV
#include "subgroup.glsl"  // after the workgroup size: the emulation sizes its scratch by it
layout(constant_id = 1) const uint DV = 128;

layout(push_constant) uniform Push {
  uint n_pairs, row_begin;  // (row, head) pairs: n_rows · n_v_heads, from row row_begin on
  uint n_v_heads, value_dim;
  float eps;
} p;
layout(std430, binding = 0) readonly buffer Params { float prm[]; }; // dt_bias[nv] | A[nv] | norm[dv]
layout(std430, binding = 1) readonly buffer Z { float z[]; };        // [row][value_dim]
layout(std430, binding = 2) buffer Y { float y[]; };                 // [row][value_dim]: o → y

shared float s_part[DV];  // a sum per subgroup (subgroups have at least one invocation)

void main() {
  const uint pair = group_index();
  if (pair >= p.n_pairs) return;  // the whole workgroup
  const uint row = p.row_begin + pair / p.n_v_heads, j = pair % p.n_v_heads;
  const uint c = gl_LocalInvocationID.x;
  const uint at = row * p.value_dim + j * DV + c;
  const float o = y[at];
  const float squares = sg_add(o * o);
  if (sg_elect()) s_part[SG_ID] = squares;
  barrier();
  float total = 0.0;
  for (uint s = 0u; s < SG_COUNT; ++s) total += s_part[s];
  const float scale = inversesqrt(total / float(DV) + p.eps);
  y[at] = o * scale * prm[2u * p.n_v_heads + c] * silu(z[at]);
}
