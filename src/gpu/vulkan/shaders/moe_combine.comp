#version 450
// The MoE output per token, the CPU's phase D (src/model/blocks/moe.cpp): out = Σ_k w_k · e_k
// in top-k order, plus sigmoid(g) · shared when there is a shared expert; each term added in
// the CPU's order. One invocation per (token, element).
// add_residual: the block output goes straight into the residual stream, x += out, added
// exactly as the separate add would (x + (routed + shared)); `out` is then not written.
// use_map (the VRAM expert cache): some pairs were computed on the CPU, whose weighted sum
// `out` already holds; map[row·k + k] names the row of `ex` of each pair computed here, −1
// for the CPU's. The sum starts from `out` and adds this GPU's pairs in top-k order.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n_embd, k, n_rows, has_shared, has_routed, add_residual, use_map; } p;
layout(std430, binding = 0) readonly buffer E { float ex[]; };      // [row·k][n_embd] expert outputs, pair order
layout(std430, binding = 1) readonly buffer Wts { float wts[]; };   // [row·k]
layout(std430, binding = 2) readonly buffer Sh { float sh[]; };     // [row][n_embd]
layout(std430, binding = 3) readonly buffer Sg { float sg[]; };     // [row] shared gate logits
layout(std430, binding = 4) buffer Out { float o[]; };              // [row][n_embd]
layout(std430, binding = 5) buffer Residual { float x[]; };         // [row][n_embd] (add_residual)
layout(std430, binding = 6) readonly buffer Map { int map[]; };     // [row·k] (use_map)

void main() {
  const uint i = group_index() * 64u + gl_LocalInvocationID.x;
  if (i >= p.n_rows * p.n_embd) return;
  const uint row = i / p.n_embd, c = i % p.n_embd;
  float acc = 0.0;
  if (p.use_map != 0u) {
    acc = o[i];
    if (p.has_routed != 0u) {
      for (uint k = 0u; k < p.k; ++k) {
        const int m = map[row * p.k + k];
        if (m < 0) continue;
        precise float term = wts[row * p.k + k] * ex[uint(m) * p.n_embd + c];
        precise float s = acc + term;
        acc = s;
      }
    }
  } else if (p.has_routed != 0u) {
    for (uint k = 0u; k < p.k; ++k) {
      precise float term = wts[row * p.k + k] * ex[(row * p.k + k) * p.n_embd + c];
      precise float s = acc + term;
      acc = s;
    }
  } else {
    acc = o[i];  // routed experts computed elsewhere (the CPU), already in out
  }
  if (p.has_shared != 0u) {
    precise float term = sigmoid(sg[row]) * sh[row * p.n_embd + c];
    precise float s = acc + term;
    acc = s;
  }
  if (p.add_residual != 0u) {
    precise float s = x[i] + acc;
    x[i] = s;
  } else {
    o[i] = acc;
  }
}
