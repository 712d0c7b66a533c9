#version 450
// K or V rows (f32) into a sequence's cache at consecutive positions, in the cache's type,
// rounded exactly as the CPU's store (src/model/blocks/attention.cpp):
//   f32; f16 (round to nearest even); q8_0 (d = max|x| / 127, q = round half away from zero of
//   x · (1/d)); q4_0 (d = m / −8 with m the element of largest magnitude, first on ties;
//   q = min(15, floor(x · (1/d) + 8.5))) — the reference quantizers (src/tensor/types/).
// f32/f16: one invocation per output word. q8_0/q4_0: one workgroup per row, block scales
// first, then each invocation assembles whole words (blocks are not word-aligned).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_rows, width;   // rows, elements per row
  uint src_stride;      // floats between source rows
  uint dst_first_row;   // cache position of row 0
  uint type;            // 0 f32, 1 f16, 2 q8_0, 3 q4_0
  uint src_offset;      // floats before source row 0
  uint row_bytes;       // bytes of one cache row (a multiple of 4)
} p;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };

shared uint s_d16[512];
shared float s_inv[512];

float x_at(uint r, uint e) { return src[p.src_offset + r * p.src_stride + e]; }

uint q4_code(float scaled) {
  precise float shifted = scaled + 8.5;
  if (shifted >= 15.0) return 15u;
  if (!(shifted > 0.0)) return 0u;
  return uint(shifted);
}

void main() {
  if (p.type <= 1u) {
    const uint words_per_row = p.type == 1u ? p.width / 2u : p.width;
    const uint i = group_index() * 64u + gl_LocalInvocationID.x;
    if (i >= p.n_rows * words_per_row) return;
    const uint r = i / words_per_row, w = i % words_per_row;
    const uint out_word = (p.dst_first_row + r) * words_per_row + w;
    if (p.type == 1u) {
      dst[out_word] = f32_to_f16(x_at(r, 2u * w)) | (f32_to_f16(x_at(r, 2u * w + 1u)) << 16u);
    } else {
      dst[out_word] = floatBitsToUint(x_at(r, w));
    }
    return;
  }
  const uint r = group_index();
  if (r >= p.n_rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint nb = p.width / 32u;
  const uint block_bytes = p.type == 2u ? 34u : 18u;
  for (uint b = t; b < nb; b += 64u) {
    float d;
    if (p.type == 2u) {
      float a = 0.0;
      for (uint j = 0u; j < 32u; ++j) a = max(a, abs(x_at(r, b * 32u + j)));
      d = div_rn(a, 127.0);
    } else {
      float best = 0.0, m = 0.0;
      for (uint j = 0u; j < 32u; ++j) {
        const float v = x_at(r, b * 32u + j);
        if (abs(v) > best) {
          best = abs(v);
          m = v;
        }
      }
      d = div_rn(m, -8.0);
    }
    s_d16[b] = f32_to_f16(d);
    s_inv[b] = d != 0.0 ? div_rn(1.0, d) : 0.0;
  }
  barrier();
  const uint row_word = (p.dst_first_row + r) * (p.row_bytes / 4u);
  for (uint w = t; w < p.row_bytes / 4u; w += 64u) {
    uint word = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      const uint o = 4u * w + k;
      const uint bi = o / block_bytes, within = o % block_bytes;
      uint byte_ = 0u;
      if (within < 2u) {
        byte_ = (s_d16[bi] >> (8u * within)) & 0xFFu;
      } else if (p.type == 2u) {
        precise float scaled = x_at(r, bi * 32u + within - 2u) * s_inv[bi];
        const float rounded = sign(scaled) * floor(abs(scaled) + 0.5);
        byte_ = uint(int(rounded)) & 0xFFu;
      } else {
        const uint j = within - 2u;
        precise float lo = x_at(r, bi * 32u + j) * s_inv[bi];
        precise float hi = x_at(r, bi * 32u + j + 16u) * s_inv[bi];
        byte_ = q4_code(lo) | (q4_code(hi) << 4u);
      }
      word |= byte_ << (8u * k);
    }
    dst[row_word + w] = word;
  }
}
