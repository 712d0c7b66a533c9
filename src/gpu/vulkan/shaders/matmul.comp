#version 450
// y[t][o] = Σ_i W[o][i] · x[t][i] for GGUF weight rows in their block format and activation
// rows already in the weight type's activation type (quantize.comp). One variant per weight
// type (WTYPE_*). The arithmetic is the CPU scalar reference's (src/cpu/dot/*_scalar.cpp):
// every block's inner product is an exact integer sum, turned into one float with the same
// expression, and a row's block values are added in block order by one thread, so the result
// is bit for bit the CPU's. Float weights (F32/F16/BF16) accumulate in float-float (≈ the
// CPU's double sum) for the same reason.
//
// Workgroup: 64 threads, R output rows of one token (R·blocks ≤ 2048, R ≤ 64). Work item
// (row, block) values go to shared memory; thread r then sums row r.
// MATMUL_ID: the weight is a stack of matrices (experts); pair z of the dispatch uses
// matrix ids[z] and activation row rows[z]. A stack larger than one binding is dispatched
// once per part; each pair is computed by the part that holds its matrix.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_in;        // elements per row
  uint n_out;       // output rows of this weight chunk
  uint w_row_bytes;
  uint x_row_bytes; // bytes between activation rows
  uint y_stride;    // floats between output rows (tokens / pairs)
  uint y_offset;    // column of y that output row 0 of this chunk goes to
  uint rows_per_group;
  uint mat_bytes;   // MATMUL_ID: bytes between matrices of the stack
  uint n_pairs;     // MATMUL_ID: pairs in the dispatch (z groups)
  uint mat_first;   // MATMUL_ID: the stack part bound holds matrices [mat_first, mat_first + mat_count)
  uint mat_count;
} p;
layout(std430, binding = 0) readonly buffer W { uint wd[]; };
layout(std430, binding = 1) readonly buffer X { uint xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#if defined(MATMUL_ID)
layout(std430, binding = 3) readonly buffer Ids { uint ids[]; };    // [pair] matrix index
layout(std430, binding = 4) readonly buffer Rows { uint rows[]; };  // [pair] activation row
#endif

#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
#define FLOAT_WEIGHTS 1
#define BLOCK 32u
shared vec2 s_val[2048];
#else
shared float s_val[2048];
#endif
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K) || defined(WTYPE_IQ4_XS)
#define BLOCK 256u
#elif defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
#define BLOCK 32u
#endif

#define WB(o) BYTE_AT(wd, o)
#define XB(o) BYTE_AT(xd, o)

#if defined(FLOAT_WEIGHTS)
vec2 ff_add(vec2 acc, vec2 v) {
  vec2 s = two_sum(acc.x, v.x);
  precise float lo = s.y + acc.y + v.y;
  return two_sum(s.x, lo);
}
float weight_f(uint wo, uint i) {
#if defined(WTYPE_F32)
  return uintBitsToFloat(wd[(wo >> 2u) + i]);
#elif defined(WTYPE_F16)
  return f16_to_f32(U16_AT(wd, wo + 2u * i));
#else
  return bf16_to_f32(U16_AT(wd, wo + 2u * i));
#endif
}
float act_f(uint xo, uint i) {
#if defined(WTYPE_F32)
  return uintBitsToFloat(xd[(xo >> 2u) + i]);
#elif defined(WTYPE_F16)
  return f16_to_f32(U16_AT(xd, xo + 2u * i));
#else
  return bf16_to_f32(U16_AT(xd, xo + 2u * i));
#endif
}
#endif

#if defined(WTYPE_IQ4_XS)
const int kIQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// 6-bit scale and min of sub-block j from the 12 packed bytes at `so`.
uvec2 scale_min(uint so, uint j) {
  if (j < 4u) return uvec2(WB(so + j) & 0x3Fu, WB(so + j + 4u) & 0x3Fu);
  const uint low = WB(so + j + 4u);
  return uvec2((low & 0x0Fu) | ((WB(so + j - 4u) >> 6u) << 4u), (low >> 4u) | ((WB(so + j) >> 6u) << 4u));
}
#endif

// The value one weight block adds to the dot product (block b of the row at byte wo,
// against the activation row at byte xo).
#if defined(FLOAT_WEIGHTS)
vec2 block_value(uint wo, uint xo, uint b) {
  vec2 acc = vec2(0.0);
  for (uint i = b * 32u; i < b * 32u + 32u; ++i) acc = ff_add(acc, two_prod(weight_f(wo, i), act_f(xo, i)));
  return acc;
}
#else
float block_value(uint wo_row, uint xo_row, uint b) {
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#if defined(WTYPE_Q4_K)
  const uint wo = wo_row + b * 144u, qs = wo + 16u;
#else
  const uint wo = wo_row + b * 176u, qh = wo + 16u, qs = wo + 48u;
#endif
  const uint xo = xo_row + b * 292u;
  const float d = f16_to_f32(U16_AT(wd, wo)), dmin = f16_to_f32(U16_AT(wd, wo + 2u));
  const float da = uintBitsToFloat(xd[xo >> 2u]);
  int scaled = 0, mins = 0;
  for (uint j = 0u; j < 8u; ++j) {
    const uvec2 sm = scale_min(wo + 4u, j);
    const uint group = qs + 32u * (j / 2u), shift = 4u * (j % 2u);
    int isum = 0;
    for (uint l = 0u; l < 32u; l += 4u) {
      const uint wq = wd[(group + l) >> 2u];
      const uint aq = xd[(xo + 4u + 32u * j + l) >> 2u];
#if defined(WTYPE_Q5_K)
      const uint hw = wd[(qh + l) >> 2u];
#endif
      [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        int q = int((wq >> (8u * k + shift)) & 0x0Fu);
#if defined(WTYPE_Q5_K)
        q |= int(((hw >> (8u * k + j)) & 1u) << 4u);
#endif
        isum += q * sext8((aq >> (8u * k)) & 0xFFu);
      }
    }
    scaled += int(sm.x) * isum;
    const uint bs = xo + 4u + 256u + 4u * j;  // bsums 2j, 2j+1 (int16 each)
    const uint bw = xd[bs >> 2u];
    mins += int(sm.y) * (sext16(bw & 0xFFFFu) + sext16(bw >> 16u));
  }
  precise float v = d * da * float(scaled) - dmin * da * float(mins);
  return v;
#elif defined(WTYPE_Q6_K)
  const uint wo = wo_row + b * 210u;
  const uint xo = xo_row + b * 292u;
  int scaled = 0;
  for (uint half_ = 0u; half_ < 2u; ++half_) {
    const uint ql = wo + 64u * half_, qh = wo + 128u + 32u * half_, sc = wo + 192u + 8u * half_;
    const uint qa = xo + 4u + 128u * half_;
    for (uint l = 0u; l < 32u; ++l) {
      const uint l0 = WB(ql + l), l1 = WB(ql + l + 32u), h = WB(qh + l);
      const int q1 = int((l0 & 0x0Fu) | (((h >> 0u) & 3u) << 4u)) - 32;
      const int q2 = int((l1 & 0x0Fu) | (((h >> 2u) & 3u) << 4u)) - 32;
      const int q3 = int((l0 >> 4u) | (((h >> 4u) & 3u) << 4u)) - 32;
      const int q4 = int((l1 >> 4u) | (((h >> 6u) & 3u) << 4u)) - 32;
      const uint s = l / 16u;
      scaled += sext8(WB(sc + s)) * q1 * sext8(XB(qa + l)) + sext8(WB(sc + s + 2u)) * q2 * sext8(XB(qa + l + 32u)) +
                sext8(WB(sc + s + 4u)) * q3 * sext8(XB(qa + l + 64u)) + sext8(WB(sc + s + 6u)) * q4 * sext8(XB(qa + l + 96u));
    }
  }
  const float d = f16_to_f32(U16_AT(wd, wo + 208u));
  const float da = uintBitsToFloat(xd[xo >> 2u]);
  precise float v = d * da * float(scaled);
  return v;
#elif defined(WTYPE_IQ4_XS)
  const uint wo = wo_row + b * 136u;
  const uint xo = xo_row + b * 292u;
  const uint scales_h = U16_AT(wd, wo + 2u);
  int scaled = 0;
  for (uint j = 0u; j < 8u; ++j) {
    const int ls = int(((WB(wo + 4u + j / 2u) >> (4u * (j % 2u))) & 0x0Fu) | (((scales_h >> (2u * j)) & 3u) << 4u));
    const uint qs = wo + 8u + 16u * j, qa = xo + 4u + 32u * j;
    int isum = 0;
    for (uint l = 0u; l < 16u; ++l) {
      const uint q = WB(qs + l);
      isum += kIQ4NL[q & 0x0Fu] * sext8(XB(qa + l)) + kIQ4NL[q >> 4u] * sext8(XB(qa + l + 16u));
    }
    scaled += (ls - 32) * isum;
  }
  const float d = f16_to_f32(U16_AT(wd, wo));
  const float da = uintBitsToFloat(xd[xo >> 2u]);
  precise float v = d * da * float(scaled);
  return v;
#elif defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
  const uint xo = xo_row + b * 34u;
  int isum = 0;
#if defined(WTYPE_Q8_0)
  const uint wo = wo_row + b * 34u;
  for (uint j = 0u; j < 32u; ++j) isum += sext8(WB(wo + 2u + j)) * sext8(XB(xo + 2u + j));
#else
  const uint wo = wo_row + b * 18u;
  for (uint j = 0u; j < 16u; ++j) {
    const uint q = WB(wo + 2u + j);
    isum += (int(q & 0x0Fu) - 8) * sext8(XB(xo + 2u + j)) + (int(q >> 4u) - 8) * sext8(XB(xo + 2u + j + 16u));
  }
#endif
  const float dw = f16_to_f32(U16_AT(wd, wo)), da = f16_to_f32(U16_AT(xd, xo));
  precise float dd = dw * da;
  precise float v = float(isum) * dd;
  return v;
#endif
}
#endif

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint z = gl_WorkGroupID.z;  // token, or pair for MATMUL_ID
  const uint R = p.rows_per_group;
  const uint row0 = group_index() * R;
  const uint nb = p.n_in / BLOCK;
#if defined(MATMUL_ID)
  if (z >= p.n_pairs) return;
  const uint mat = ids[z];
  if (mat < p.mat_first || mat >= p.mat_first + p.mat_count) return;  // in another part of the stack
  const uint mat_base = (mat - p.mat_first) * p.mat_bytes;
  const uint xo = rows[z] * p.x_row_bytes;
#else
  const uint mat_base = 0u;
  const uint xo = z * p.x_row_bytes;
#endif
  for (uint i = t; i < R * nb; i += 64u) {
    const uint r = i / nb, b = i % nb;
    const uint row = row0 + r;
    if (row < p.n_out) s_val[i] = block_value(mat_base + row * p.w_row_bytes, xo, b);
  }
  barrier();
  if (t < R && row0 + t < p.n_out) {
#if defined(FLOAT_WEIGHTS)
    vec2 acc = vec2(0.0);
    for (uint b = 0u; b < nb; ++b) acc = ff_add(acc, s_val[t * nb + b]);
    const float sum = acc.x + acc.y;
#else
    float sum = 0.0;
    for (uint b = 0u; b < nb; ++b) sum += s_val[t * nb + b];
#endif
    y[z * p.y_stride + p.y_offset + row0 + t] = sum;
  }
}
