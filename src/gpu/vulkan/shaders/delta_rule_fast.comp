#version 450
// Gated DeltaNet's recurrence with the state in registers: the fast counterpart of
// delta_rule.comp (same bindings and semantics, but y gets the raw output o; the gated
// RMSNorm runs afterwards in delta_rule_fast_norm.comp, because a head's columns are split
// across workgroups here). For V head j (K head j % n_k_heads), per token:
//   S ← decay·S;  δ_c = β·(v_c − Σ_i S[i][c]·k_i);  S[i][c] += k_i·δ_c;  o_c = Σ_i S[i][c]·q_i · q_scale
// β = sigmoid(b), decay = exp(softplus(a + dt_bias[j]) · A[j]); q and k arrive L2-normalised.
//
// Work split: one workgroup per (V head, block of COLS state columns), DV/COLS blocks per
// head. Invocation (col, lane) owns column c = block·COLS + col and the state rows
// i = n·SPLIT + lane (n < ROWS = DK/SPLIT) in registers, loaded once per dispatch and stored
// once at its end. The SPLIT lanes of a column are adjacent in the subgroup, so each
// length-DK dot product is ROWS sequential multiply-adds per lane (the CPU's order within a
// lane) and a shuffle butterfly over the lanes, which leaves the identical sum in every lane.
//
// Inputs go through shared memory in stages of STAGE tokens, double-buffered: while the
// tokens of one stage are computed, the next stage's q | k | v | β | α already travel from
// global memory into registers (PREFETCH per invocation) and are stored to the other buffer
// afterwards; one barrier per stage, none per token.
//
// Loops: the per-token loops run ROWS and log2(SPLIT) iterations (fixed once specialised);
// vk_ops_delta.cpp counts them, unrolled or not, against lavapipe's loop limit (vk_ops.h).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(local_size_x_id = 0) in;               // = COLS · SPLIT
#include "subgroup.glsl"  // after the workgroup size: the emulation sizes its scratch by it
layout(constant_id = 1) const uint DK = 128;  // d_k (state rows)
layout(constant_id = 2) const uint DV = 128;  // d_v (state columns)
layout(constant_id = 3) const uint SPLIT = 4; // lanes per column: a power of two ≤ 8, divides DK
layout(constant_id = 4) const uint COLS = 32; // columns per workgroup, divides DV
layout(constant_id = 5) const uint STAGE = 8; // tokens per shared-memory stage

const uint WG = COLS * SPLIT;
const uint ROWS = DK / SPLIT;                         // state entries per invocation
// One stage buffer: [t][q (DK) | k (DK)], then v [t][COLS], then β [t], then decay [t].
const uint QK_FLOATS = STAGE * 2u * DK;
const uint V_AT = QK_FLOATS;
const uint BETA_AT = V_AT + STAGE * COLS;
const uint DECAY_AT = BETA_AT + STAGE;
const uint STAGE_FLOATS = DECAY_AT + STAGE;
const uint PREFETCH = (STAGE_FLOATS + WG - 1u) / WG;  // stage floats each invocation moves

layout(push_constant) uniform Push {
  uint n_rows, row_begin;
  uint n_k_heads, n_v_heads;
  uint channels, key_dim, value_dim;
  float q_scale;
} p;
layout(std430, binding = 0) readonly buffer Conv { float cv[]; };    // [row][channels]: q | k | v
layout(std430, binding = 1) readonly buffer Beta { float braw[]; };  // [row][n_v_heads]
layout(std430, binding = 2) readonly buffer Alpha { float araw[]; }; // [row][n_v_heads]
layout(std430, binding = 3) readonly buffer Params { float prm[]; }; // dt_bias[nv] | A[nv] | norm[dv]
layout(std430, binding = 4) buffer S { float st[]; };                // [n_v_heads][DK][DV]
layout(std430, binding = 5) writeonly buffer Y { float y[]; };       // [row][value_dim]: raw o

shared float s_stage[2u * STAGE_FLOATS];

float softplus(float x) {  // as delta_rule.comp
  if (x > 20.0) return x;
  const float e = exp(x);
  return e < 1e-4 ? e - 0.5 * e * e : log(1.0 + e);
}

// Stage element e (< STAGE_FLOATS) of the stage whose first row is row0 and which holds
// n_tok rows, as stored in the buffer, before the β/decay transforms (stage_transform).
float stage_load(uint e, uint row0, uint n_tok, uint j, uint ih, uint c0) {
  if (e < V_AT) {
    const uint t = e / (2u * DK), r = e % (2u * DK);
    if (t >= n_tok) return 0.0;
    const uint at = r < DK ? ih * DK + r : p.key_dim + ih * DK + (r - DK);
    return cv[(row0 + t) * p.channels + at];
  }
  if (e < BETA_AT) {
    const uint t = (e - V_AT) / COLS, col = (e - V_AT) % COLS;
    if (t >= n_tok) return 0.0;
    return cv[(row0 + t) * p.channels + 2u * p.key_dim + j * DV + c0 + col];
  }
  if (e < STAGE_FLOATS) {
    const uint t = (e - BETA_AT) % STAGE;
    if (t >= n_tok) return 0.0;
    return e < DECAY_AT ? braw[(row0 + t) * p.n_v_heads + j] : araw[(row0 + t) * p.n_v_heads + j];
  }
  return 0.0;
}

float stage_transform(uint e, float raw, float dt_bias, float a_log) {
  if (e >= BETA_AT && e < DECAY_AT) return sigmoid(raw);
  if (e >= DECAY_AT) return exp(softplus(raw + dt_bias) * a_log);
  return raw;
}

// Σ of x over the SPLIT lanes of a column (aligned, adjacent lanes): a butterfly, so every
// lane ends with the same sum.
float sum_over_lanes(float x) {
  [[unroll]] for (uint m = 1u; m < SPLIT; m <<= 1u) x += sg_shuffle_xor(x, m);
  return x;
}

void main() {
  const uint blocks = DV / COLS;
  const uint group = group_index();
  if (group >= p.n_v_heads * blocks) return;  // the whole workgroup
  const uint j = group / blocks, c0 = (group % blocks) * COLS;
  const uint ih = j % p.n_k_heads;
  // The invocation's place among the workgroup's subgroups: adjacent lanes, one column.
  const uint slot = SG_ID * SG_SIZE + SG_INVOCATION;
  const uint tid = gl_LocalInvocationID.x;
  const uint col = slot / SPLIT, lane = slot % SPLIT;
  const uint c = c0 + col;
  const float dt_bias = prm[j], a_log = prm[p.n_v_heads + j];

  float s[ROWS];  // S[n·SPLIT + lane][c]
  const uint state_at = j * DK * DV + lane * DV + c;
  [[unroll]] for (uint n = 0u; n < ROWS; ++n) s[n] = st[state_at + n * SPLIT * DV];

  const uint n_stages = (p.n_rows + STAGE - 1u) / STAGE;
  float pf[PREFETCH];
  // Stage 0 straight into buffer 0.
  {
    const uint n_tok = min(STAGE, p.n_rows);
    [[unroll]] for (uint n = 0u; n < PREFETCH; ++n) pf[n] = stage_load(n * WG + tid, p.row_begin, n_tok, j, ih, c0);
    [[unroll]] for (uint n = 0u; n < PREFETCH; ++n) {
      const uint e = n * WG + tid;
      if (e < STAGE_FLOATS) s_stage[e] = stage_transform(e, pf[n], dt_bias, a_log);
    }
  }
  barrier();

  for (uint stage = 0u; stage < n_stages; ++stage) {
    const uint base = (stage & 1u) * STAGE_FLOATS;
    const uint row0 = p.row_begin + stage * STAGE;
    const uint n_tok = min(STAGE, p.n_rows - stage * STAGE);
    const bool more = stage + 1u < n_stages;
    if (more) {  // the next stage's loads, in flight during this stage's tokens
      const uint next_tok = min(STAGE, p.n_rows - (stage + 1u) * STAGE);
      [[unroll]] for (uint n = 0u; n < PREFETCH; ++n) pf[n] = stage_load(n * WG + tid, row0 + STAGE, next_tok, j, ih, c0);
    }
    for (uint t = 0u; t < n_tok; ++t) {
      const uint q_at = base + t * 2u * DK + lane, k_at = q_at + DK;
      const float decay = s_stage[base + DECAY_AT + t], beta = s_stage[base + BETA_AT + t];
      float sk = 0.0;
      [[unroll]] for (uint n = 0u; n < ROWS; ++n) {
        s[n] *= decay;
        sk += s[n] * s_stage[k_at + n * SPLIT];
      }
      sk = sum_over_lanes(sk);
      const float delta = beta * (s_stage[base + V_AT + t * COLS + col] - sk);
      float o = 0.0;
      [[unroll]] for (uint n = 0u; n < ROWS; ++n) {
        s[n] += s_stage[k_at + n * SPLIT] * delta;
        o += s[n] * s_stage[q_at + n * SPLIT];
      }
      o = sum_over_lanes(o);
      if (lane == 0u) y[(row0 + t) * p.value_dim + j * DV + c] = o * p.q_scale;
    }
    if (more) {  // into the other buffer: its last readers finished before the previous barrier
      const uint other = STAGE_FLOATS - base;
      [[unroll]] for (uint n = 0u; n < PREFETCH; ++n) {
        const uint e = n * WG + tid;
        if (e < STAGE_FLOATS) s_stage[other + e] = stage_transform(e, pf[n], dt_bias, a_log);
      }
    }
    barrier();
  }

  [[unroll]] for (uint n = 0u; n < ROWS; ++n) st[state_at + n * SPLIT * DV] = s[n];
}
