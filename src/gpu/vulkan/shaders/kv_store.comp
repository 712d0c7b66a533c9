#version 450
// K or V rows (f32) into a sequence's cache at consecutive positions, as f16 (the CPU's
// f32_to_fp16_row, round to nearest even) or f32. One invocation per output word.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_rows, width;   // rows, elements per row (even)
  uint src_stride;      // floats between source rows
  uint dst_first_row;   // cache position of row 0
  uint f16;             // 1: f16 cache, 0: f32
  uint src_offset;      // floats before source row 0
} p;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };

void main() {
  const uint words_per_row = p.f16 != 0u ? p.width / 2u : p.width;
  const uint i = group_index() * 64u + gl_LocalInvocationID.x;
  if (i >= p.n_rows * words_per_row) return;
  const uint r = i / words_per_row, w = i % words_per_row;
  const uint out_word = (p.dst_first_row + r) * words_per_row + w;
  if (p.f16 != 0u) {
    dst[out_word] = f32_to_f16(src[p.src_offset + r * p.src_stride + 2u * w]) | (f32_to_f16(src[p.src_offset + r * p.src_stride + 2u * w + 1u]) << 16u);
  } else {
    dst[out_word] = floatBitsToUint(src[p.src_offset + r * p.src_stride + w]);
  }
}
