#version 450
// Fast mat-vec for decode: y[c][o] = W[o] · x[c] for up to NCOLS activation rows (tokens)
// at once, weights in their GGUF block format, activations already in the weight type's
// activation type (quantize.comp). Bandwidth-bound: every weight byte is loaded once per
// dispatch with 32-bit loads, shared by the NCOLS tokens.
//
// Workgroup: WG invocations = SLOTS groups of TPB lanes; a group of lanes shares one block
// (lane_dot.glsl), the groups stride over the blocks of a row, and every group serves the
// NR rows of the workgroup, so each activation block is loaded once for NR rows. The partial
// sums are reduced with subgroupAdd, then across subgroups through shared memory.
// MATVEC_ID: the weight is a stack of matrices (experts); z = pair, matrix ids[z],
// activation row rows[z], one token per pair (NCOLS = 1).
// SWIGLU: a second weight (binding 5) of the same shape; y = silu(W·x) · (W2·x).
// Push `accumulate`: y += result (a fused residual add) instead of y = result.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "common.glsl"

layout(local_size_x_id = 0) in;
#include "subgroup.glsl"  // after the workgroup size: the emulation sizes its scratch by it
layout(constant_id = 1) const uint NR = 2;     // rows per workgroup
layout(constant_id = 2) const uint NCOLS = 1;  // activation rows (tokens) per dispatch

layout(push_constant) uniform Push {
  uint n_in, n_out;      // elements per row; rows of this weight part
  uint w_row_bytes, x_row_bytes;
  uint y_stride, y_offset;  // floats between output rows; column of y for row 0 of this part
  uint n_cols;           // activation rows used (<= NCOLS)
  uint mat_bytes, mat_first, mat_count;  // MATVEC_ID: stack layout of this part
  uint n_pairs;
  uint accumulate;
} p;
layout(std430, binding = 0) readonly buffer W { uint wd[]; };
layout(std430, binding = 1) readonly buffer X { uint xd[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Ids { uint ids[]; };   // MATVEC_ID: [pair] matrix
layout(std430, binding = 4) readonly buffer Rows { uint rows[]; }; // MATVEC_ID: [pair] activation row
#if defined(SWIGLU)
layout(std430, binding = 5) readonly buffer W2 { uint wd2[]; };
#endif

#define WD wd
#define LANE_DOT lane_dot
#include "lane_dot.glsl"
#undef WD
#undef LANE_DOT
#if defined(SWIGLU)
#define WD wd2
#define LANE_DOT lane_dot_up
#include "lane_dot.glsl"
#undef WD
#undef LANE_DOT
#define NACC 2u
#else
#define NACC 1u
#endif
shared float s_part[NR * NCOLS * NACC][32];  // per subgroup (at most 32 subgroups)

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint SLOTS = WG / TPB;
  const uint t = gl_LocalInvocationID.x;
  const uint slot = t / TPB, lane = t % TPB;
  const uint row0 = group_index() * NR;
  const uint nb = p.n_in / BLOCK;
#if defined(MATVEC_ID)
  const uint z = gl_WorkGroupID.z;
  const uint mat = ids[z];
  if (mat < p.mat_first || mat >= p.mat_first + p.mat_count) return;  // in another part of the stack
  const uint w_base = (mat - p.mat_first) * p.mat_bytes;
  const uint x_base = rows[z] * p.x_row_bytes;
  const uint y_base = z * p.y_stride + p.y_offset;
#else
  const uint w_base = 0u, x_base = 0u, y_base = p.y_offset;
#endif
  if (row0 >= p.n_out) return;

  float acc[NR * NCOLS * NACC];
  [[unroll]] for (uint i = 0u; i < NR * NCOLS * NACC; ++i) acc[i] = 0.0;
  for (uint b = slot; b < nb; b += SLOTS) {
    [[unroll]] for (uint r = 0u; r < NR; ++r) {
      const uint row = min(row0 + r, p.n_out - 1u);  // rows past the end compute row n_out-1, never written
      const uint wo = w_base + row * p.w_row_bytes + b * W_BLOCK_BYTES;
      [[unroll]] for (uint c = 0u; c < NCOLS; ++c) {
        if (c < p.n_cols) {
          const uint xo = x_base + c * p.x_row_bytes + b * X_BLOCK_BYTES;
          acc[(r * NCOLS + c) * NACC] += lane_dot(lane, wo, xo);
#if defined(SWIGLU)
          acc[(r * NCOLS + c) * NACC + 1u] += lane_dot_up(lane, wo, xo);
#endif
        }
      }
    }
  }
  // Sum over the workgroup: within each subgroup (every invocation gets the sums), then
  // across subgroups through shared memory. Thread i < NR·NCOLS writes output i.
  const bool one_subgroup = SG_COUNT == 1u;
  [[unroll]] for (uint i = 0u; i < NR * NCOLS * NACC; ++i) {
    acc[i] = sg_add(acc[i]);
    if (!one_subgroup && sg_elect()) s_part[i][SG_ID] = acc[i];
  }
  if (!one_subgroup) barrier();
  const uint n_outputs = NR * NCOLS;
  if (t >= n_outputs) return;
  const uint r = t / NCOLS, c = t % NCOLS;
  if (row0 + r >= p.n_out || c >= p.n_cols) return;
  float v[NACC];
  if (one_subgroup) {
    [[unroll]] for (uint i = 0u; i < NR * NCOLS; ++i) {
      if (i == t) {
        [[unroll]] for (uint a = 0u; a < NACC; ++a) v[a] = acc[i * NACC + a];
      }
    }
  } else {
    [[unroll]] for (uint a = 0u; a < NACC; ++a) {
      float s = 0.0;
      for (uint g = 0u; g < SG_COUNT; ++g) s += s_part[t * NACC + a][g];
      v[a] = s;
    }
  }
#if defined(SWIGLU)
  const float result = silu(v[0]) * v[1];
#else
  const float result = v[0];
#endif
  const uint o = y_base + c * p.y_stride + row0 + r;
  y[o] = p.accumulate != 0u ? y[o] + result : result;
}
