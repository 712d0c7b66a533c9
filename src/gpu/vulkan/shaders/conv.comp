#version 450
// Gated DeltaNet's causal depthwise convolution over time for one sequence, the CPU's
// delta_net_block: input = [carried taps−1 rows | the sequence's new rows]; out row t =
// silu(Σ_j w[c][j] · in[t + j]) (j in order); afterwards the last taps−1 inputs become the
// carried state. One invocation per channel.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_rows, channels, taps;
  uint row_begin;  // first row of this sequence in qkv / out
} p;
layout(std430, binding = 0) readonly buffer In { float qkv[]; };  // [row][channels]
layout(std430, binding = 1) readonly buffer Wt { float w[]; };    // [channels][taps]
layout(std430, binding = 2) buffer State { float st[]; };         // [taps−1][channels]
layout(std430, binding = 3) writeonly buffer Out { float o[]; };  // [row][channels]

float input_at(uint c, uint k) {  // element c of input row k (rows 0 .. taps−2 are the state)
  return k < p.taps - 1u ? st[k * p.channels + c] : qkv[(p.row_begin + k - (p.taps - 1u)) * p.channels + c];
}

void main() {
  const uint c = group_index() * 64u + gl_LocalInvocationID.x;
  if (c >= p.channels) return;
  for (uint t = 0u; t < p.n_rows; ++t) {
    float acc = 0.0;
    for (uint j = 0u; j < p.taps; ++j) {
      precise float prod = w[c * p.taps + j] * input_at(c, t + j);
      precise float sum = acc + prod;
      acc = sum;
    }
    o[(p.row_begin + t) * p.channels + c] = silu(acc);
  }
  // New state: input rows n_rows .. n_rows + taps − 2 (read them all before writing).
  float carry[8];
  for (uint k = 0u; k < p.taps - 1u; ++k) carry[k] = input_at(c, p.n_rows + k);
  for (uint k = 0u; k < p.taps - 1u; ++k) st[k * p.channels + c] = carry[k];
}
