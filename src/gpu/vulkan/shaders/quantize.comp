#version 450
// f32 activation rows → the activation type of a weight type's dot product, rounded
// exactly like the CPU (src/tensor/types/q8_k.cpp, q8_0.cpp, fp16.cpp), so GPU matmuls see
// the same int8 codes and scales as CPU ones. One workgroup per row.
//   ACT_Q8_K: blocks of 256: m = the element of largest magnitude (first on ties),
//             s = -127 / m, q = min(127, round_half_even(s·x)), d = 1 / s, bsums of 16.
//   ACT_Q8_0: blocks of 32: a = max|x|, d = fp16(a / 127), q = round_half_even(x · (127 / a)).
//   ACT_F16 / ACT_BF16: round to nearest even.
// Output rows are y_stride bytes apart (a multiple of 4).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_in;      // elements per row
  uint n_rows;
  uint x_stride;  // floats between input rows
  uint y_stride;  // bytes between output rows
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

#if defined(ACT_Q8_K)
shared float s_mag[64];
shared uint s_idx[64];
shared int s_sum[64];
#elif defined(ACT_Q8_0)
shared uint s_d16[2048];
shared float s_mul[2048];
#endif

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint xb = row * p.x_stride;
  const uint yw = row * (p.y_stride >> 2u);  // first word of the output row
#if defined(ACT_Q8_K)
  for (uint b = 0u; b < p.n_in / 256u; ++b) {
    const uint base = xb + b * 256u + t * 4u;
    float v[4];
    float best = 0.0;
    uint best_idx = 0xFFFFFFFFu;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[i] = x[base + i];
      const float m = abs(v[i]);
      if (m > best) {
        best = m;
        best_idx = t * 4u + i;
      }
    }
    s_mag[t] = best;
    s_idx[t] = best_idx;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1u) {
      if (t < s) {
        const float mo = s_mag[t + s];
        const uint io = s_idx[t + s];
        if (mo > s_mag[t] || (mo == s_mag[t] && io < s_idx[t])) {
          s_mag[t] = mo;
          s_idx[t] = io;
        }
      }
      barrier();
    }
    const uint block_word = yw + b * 73u;  // 292 bytes = d (1 word) + 256 codes (64) + 16 bsums (8)
    int codes[4];
    if (s_mag[0] == 0.0) {
      codes[0] = 0; codes[1] = 0; codes[2] = 0; codes[3] = 0;
      if (t == 0u) y[block_word] = 0u;
    } else {
      const float m = x[xb + b * 256u + s_idx[0]];
      const float iscale = div_rn(-127.0, m);
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        precise float scaled = iscale * v[i];
        codes[i] = min(127, int(roundEven(scaled)));
      }
      if (t == 0u) y[block_word] = floatBitsToUint(div_rn(1.0, iscale));
    }
    y[block_word + 1u + t] = (uint(codes[0]) & 0xFFu) | ((uint(codes[1]) & 0xFFu) << 8u) |
                             ((uint(codes[2]) & 0xFFu) << 16u) | ((uint(codes[3]) & 0xFFu) << 24u);
    s_sum[t] = codes[0] + codes[1] + codes[2] + codes[3];
    barrier();
    if (t < 8u) {  // groups 2t and 2t+1 of 16 codes = threads 8t .. 8t+7
      const int g0 = s_sum[8u * t] + s_sum[8u * t + 1u] + s_sum[8u * t + 2u] + s_sum[8u * t + 3u];
      const int g1 = s_sum[8u * t + 4u] + s_sum[8u * t + 5u] + s_sum[8u * t + 6u] + s_sum[8u * t + 7u];
      y[block_word + 65u + t] = (uint(g0) & 0xFFFFu) | (uint(g1) << 16u);
    }
    barrier();
  }
#elif defined(ACT_Q8_0)
  const uint nb = p.n_in / 32u;
  for (uint b = t; b < nb; b += 64u) {
    float a = 0.0;
    for (uint j = 0u; j < 32u; ++j) a = max(a, abs(x[xb + b * 32u + j]));
    s_d16[b] = f32_to_f16(div_rn(a, 127.0));
    s_mul[b] = a != 0.0 ? div_rn(127.0, a) : 0.0;
  }
  barrier();
  const uint n_words = (nb * 34u + 3u) / 4u;
  for (uint w = t; w < n_words; w += 64u) {
    uint word = 0u;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint o = 4u * w + k;
      const uint bi = o / 34u, within = o % 34u;
      uint byte_ = 0u;
      if (bi < nb) {
        if (within < 2u) {
          byte_ = (s_d16[bi] >> (8u * within)) & 0xFFu;
        } else {
          precise float scaled = x[xb + bi * 32u + within - 2u] * s_mul[bi];
          byte_ = uint(int(roundEven(scaled))) & 0xFFu;
        }
      }
      word |= byte_ << (8u * k);
    }
    y[yw + w] = word;
  }
#elif defined(ACT_F16) || defined(ACT_BF16)
  for (uint i = t; i < p.n_in / 2u; i += 64u) {
#if defined(ACT_F16)
    y[yw + i] = f32_to_f16(x[xb + 2u * i]) | (f32_to_f16(x[xb + 2u * i + 1u]) << 16u);
#else
    y[yw + i] = f32_to_bf16(x[xb + 2u * i]) | (f32_to_bf16(x[xb + 2u * i + 1u]) << 16u);
#endif
  }
#endif
}
