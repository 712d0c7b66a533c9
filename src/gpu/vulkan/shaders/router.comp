#version 450
// MoE routing for one token per workgroup, the CPU's route() (src/model/blocks/moe.cpp):
// softmax over all experts (max-subtracted, sum in float-float ≈ the CPU's double, times
// float(1 / sum)), the top k by probability (lower id first on ties), weights renormalised
// w = p / max(Σ_k p, 6.1035e-5). Writes, per pair z = token·k + slot, the expert id and
// the token (the activation row for the expert products).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n_expert, k, n_rows; } p;
layout(std430, binding = 0) buffer Logits { float lg[]; };          // [row][n_expert] → probabilities
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };    // [row·k]
layout(std430, binding = 2) writeonly buffer Wts { float wts[]; };   // [row·k]
layout(std430, binding = 3) writeonly buffer Rows { uint rows[]; };  // [row·k] = row

shared float s_max[64];
shared vec2 s_sum[64];

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
  memoryBarrierBuffer();
  barrier();
  for (uint e = t; e < p.n_expert; e += 64u) {
    precise float v = lg[b + e] * inv;
    lg[b + e] = v;
  }
  memoryBarrierBuffer();
  barrier();
  if (t != 0u) return;
  uint picked[16];
  float sum = 0.0;
  for (uint k = 0u; k < p.k; ++k) {
    uint best = 0xFFFFFFFFu;
    float best_p = -1.0;
    for (uint e = 0u; e < p.n_expert; ++e) {
      bool taken = false;
      for (uint q = 0u; q < k; ++q) taken = taken || picked[q] == e;
      if (!taken && lg[b + e] > best_p) {  // strict: the lower id keeps a tie
        best_p = lg[b + e];
        best = e;
      }
    }
    picked[k] = best;
    precise float s = sum + best_p;
    sum = s;
  }
  sum = max(sum, 6.1035e-5);
  for (uint k = 0u; k < p.k; ++k) {
    ids[row * p.k + k] = picked[k];
    wts[row * p.k + k] = div_rn(lg[b + picked[k]], sum);
    rows[row * p.k + k] = row;
  }
}
