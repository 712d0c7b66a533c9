#version 450
// MoE routing for one token per workgroup, the fast twin of router.comp: the same softmax
// arithmetic (max-subtracted, sum in float-float, times float(1 / sum)), so the same
// probabilities, the same expert choice and the same weights; the top k are chosen in
// parallel (k rounds of a workgroup-wide arg-max, lower id first on ties) instead of by one
// invocation scanning all experts k times.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "common.glsl"

layout(local_size_x = 64) in;
#include "subgroup.glsl"  // after the workgroup size: the emulation sizes its scratch by it
layout(push_constant) uniform Push { uint n_expert, k, n_rows; } p;
layout(std430, binding = 0) buffer Logits { float lg[]; };          // [row][n_expert] → probabilities
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };    // [row·k]
layout(std430, binding = 2) writeonly buffer Wts { float wts[]; };   // [row·k]
layout(std430, binding = 3) writeonly buffer Rows { uint rows[]; };  // [row·k] = row

shared float s_max[64];
shared vec2 s_sum[64];
shared float s_best_p[64];
shared uint s_best_e[64];

vec2 ff_add(vec2 a, vec2 b) {
  vec2 s = two_sum(a.x, b.x);
  precise float lo = s.y + a.y + b.y;
  return two_sum(s.x, lo);
}

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint b = row * p.n_expert;
  float mx = -3.402823466e38;
  for (uint e = t; e < p.n_expert; e += 64u) mx = max(mx, lg[b + e]);
  s_max[t] = mx;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) s_max[t] = max(s_max[t], s_max[t + s]);
    barrier();
  }
  mx = s_max[0];
  vec2 part = vec2(0.0);
  for (uint e = t; e < p.n_expert; e += 64u) {
    const float v = exp(lg[b + e] - mx);
    lg[b + e] = v;
    part = ff_add(part, vec2(v, 0.0));
  }
  s_sum[t] = part;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1u) {
    if (t < s) s_sum[t] = ff_add(s_sum[t], s_sum[t + s]);
    barrier();
  }
  const float inv = div_rn(1.0, s_sum[0].x + s_sum[0].y);
  // This invocation's experts t, t + 64, ... (at most 16 of them: n_expert ≤ 1024), as
  // probabilities in registers; `taken` marks the ones already picked.
  float prob[16];
  [[unroll]] for (uint i = 0u; i < 16u; ++i) {
    const uint e = t + 64u * i;
    precise float v = e < p.n_expert ? lg[b + e] * inv : -1.0;
    prob[i] = v;
    if (e < p.n_expert) lg[b + e] = v;
  }
  uint taken = 0u;
  uint picked_e[16];
  float picked_p[16];
  for (uint k = 0u; k < p.k; ++k) {
    float best_p = -1.0;
    uint best_e = 0xFFFFFFFFu;
    [[unroll]] for (uint i = 0u; i < 16u; ++i) {
      if ((taken & (1u << i)) == 0u && prob[i] > best_p) {  // strict: the lower id keeps a tie
        best_p = prob[i];
        best_e = t + 64u * i;
      }
    }
    // Arg-max over the workgroup: the largest probability, then the lowest id among equals.
    const float sg_p = sg_max(best_p);
    const uint sg_e = sg_min(best_p == sg_p ? best_e : 0xFFFFFFFFu);
    if (sg_elect()) {
      s_best_p[SG_ID] = sg_p;
      s_best_e[SG_ID] = sg_e;
    }
    barrier();
    float win_p = s_best_p[0];
    uint win_e = s_best_e[0];
    for (uint g = 1u; g < SG_COUNT; ++g) {
      if (s_best_p[g] > win_p || (s_best_p[g] == win_p && s_best_e[g] < win_e)) {
        win_p = s_best_p[g];
        win_e = s_best_e[g];
      }
    }
    barrier();  // s_best_* is written again next round
    if (win_e % 64u == t) taken |= 1u << (win_e / 64u);
    picked_e[k] = win_e;
    picked_p[k] = win_p;
  }
  if (t != 0u) return;
  float sum = 0.0;
  for (uint k = 0u; k < p.k; ++k) {
    precise float s = sum + picked_p[k];
    sum = s;
  }
  sum = max(sum, 6.1035e-5);
  for (uint k = 0u; k < p.k; ++k) {
    ids[row * p.k + k] = picked_e[k];
    wts[row * p.k + k] = div_rn(picked_p[k], sum);
    rows[row * p.k + k] = row;
  }
}
