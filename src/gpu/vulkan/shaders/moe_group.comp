#version 450
// The pairs (token, expert) of a prompt batch sorted by expert, for the grouped expert
// products (matmat.comp MATMAT_ID): counts per expert, their prefix sums as offsets
// [n_expert + 1], then each pair's index placed in its expert's range of `order`. One
// workgroup. The order inside an expert's range is arbitrary (atomics); every pair's result
// is computed the same way wherever it lands, so results do not depend on it.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n_pairs, n_expert; } p;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };       // [pair] expert
layout(std430, binding = 1) writeonly buffer Offsets { uint offsets[]; };  // [n_expert + 1]
layout(std430, binding = 2) writeonly buffer Order { uint order[]; };  // [n_pairs] pair indices by expert

shared uint s_count[1024];

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint e = t; e < p.n_expert; e += 256u) s_count[e] = 0u;
  barrier();
  for (uint z = t; z < p.n_pairs; z += 256u) {
    if (ids[z] < p.n_expert) atomicAdd(s_count[ids[z]], 1u);
  }
  barrier();
  if (t == 0u) {
    uint run = 0u;
    for (uint e = 0u; e < p.n_expert; ++e) {
      const uint c = s_count[e];
      offsets[e] = run;
      s_count[e] = run;  // now the next free slot of expert e
      run += c;
    }
    offsets[p.n_expert] = run;
  }
  barrier();
  for (uint z = t; z < p.n_pairs; z += 256u) {
    if (ids[z] < p.n_expert) order[atomicAdd(s_count[ids[z]], 1u)] = z;
  }
}
