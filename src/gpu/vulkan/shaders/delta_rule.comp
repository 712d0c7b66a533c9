#version 450
// Gated DeltaNet's recurrence for one sequence and one V head j per workgroup, the CPU's
// cpu::delta_rule_step + gated RMSNorm (src/cpu/delta_rule_impl.h, delta_net.cpp), token by
// token. Each invocation owns state columns c (S[i][c] for all i) and runs the CPU's loops
// over i in the same order:
//   S ← decay·S;  δ_c = β·(v_c − Σ_i S[i][c]·k_i);  S[i][c] += k_i·δ_c;  o_c = Σ_i S[i][c]·q_i · q_scale
//   y = rmsnorm(o) · norm · silu(z)
// β = sigmoid(b), decay = exp(softplus(a + dt_bias) · A). q and k arrive L2-normalised.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_rows, row_begin;
  uint dk, dv, n_k_heads, n_v_heads;
  uint channels, key_dim, value_dim;
  float q_scale, eps;
} p;
layout(std430, binding = 0) readonly buffer Conv { float cv[]; };    // [row][channels]: q | k | v
layout(std430, binding = 1) readonly buffer Beta { float braw[]; };  // [row][n_v_heads]
layout(std430, binding = 2) readonly buffer Alpha { float araw[]; }; // [row][n_v_heads]
layout(std430, binding = 3) readonly buffer Params { float prm[]; }; // dt_bias[nv] | A[nv] | norm[dv]
layout(std430, binding = 4) buffer S { float st[]; };                // [n_v_heads][dk][dv]
layout(std430, binding = 5) readonly buffer Z { float z[]; };        // [row][value_dim]
layout(std430, binding = 6) writeonly buffer Y { float y[]; };       // [row][value_dim]

shared float s_q[256];
shared float s_k[256];
shared vec2 s_red[64];

vec2 ff_add(vec2 a, vec2 b) {
  vec2 s = two_sum(a.x, b.x);
  precise float lo = s.y + a.y + b.y;
  return two_sum(s.x, lo);
}

float softplus(float x) {
  if (x > 20.0) return x;
  const float e = exp(x);
  return e < 1e-4 ? e - 0.5 * e * e : log(1.0 + e);
}

void main() {
  const uint j = gl_WorkGroupID.x;
  if (j >= p.n_v_heads) return;
  const uint t = gl_LocalInvocationID.x;
  const uint ih = j % p.n_k_heads;
  const uint sb = j * p.dk * p.dv;
  for (uint r = 0u; r < p.n_rows; ++r) {
    const uint row = p.row_begin + r;
    for (uint i = t; i < p.dk; i += 64u) {
      s_q[i] = cv[row * p.channels + ih * p.dk + i];
      s_k[i] = cv[row * p.channels + p.key_dim + ih * p.dk + i];
    }
    barrier();
    const float beta = sigmoid(braw[row * p.n_v_heads + j]);
    const float g = softplus(araw[row * p.n_v_heads + j] + prm[j]) * prm[p.n_v_heads + j];
    const float decay = exp(g);
    float outs[4];  // dv ≤ 256: up to 4 columns per invocation
    vec2 sq = vec2(0.0);
    for (uint n = 0u, c = t; c < p.dv; c += 64u, ++n) {
      float sk = 0.0;
      for (uint i = 0u; i < p.dk; ++i) {
        precise float decayed = st[sb + i * p.dv + c] * decay;
        st[sb + i * p.dv + c] = decayed;
        precise float acc = sk + decayed * s_k[i];
        sk = acc;
      }
      precise float delta = beta * (cv[row * p.channels + 2u * p.key_dim + j * p.dv + c] - sk);
      float out_c = 0.0;
      for (uint i = 0u; i < p.dk; ++i) {
        precise float updated = st[sb + i * p.dv + c] + s_k[i] * delta;
        st[sb + i * p.dv + c] = updated;
        precise float acc = out_c + updated * s_q[i];
        out_c = acc;
      }
      precise float scaled = out_c * p.q_scale;
      outs[n] = scaled;
      sq = ff_add(sq, two_prod(scaled, scaled));
    }
    s_red[t] = sq;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1u) {
      if (t < s) s_red[t] = ff_add(s_red[t], s_red[t + s]);
      barrier();
    }
    const float mean = div_rn(s_red[0].x, float(p.dv)) + s_red[0].y / float(p.dv);
    const float scale = 1.0 / sqrt(mean + p.eps);
    for (uint n = 0u, c = t; c < p.dv; c += 64u, ++n) {
      precise float normed = outs[n] * scale * prm[2u * p.n_v_heads + c];
      precise float gated = normed * silu(z[row * p.value_dim + j * p.dv + c]);
      y[row * p.value_dim + j * p.dv + c] = gated;
    }
    barrier();
  }
}
