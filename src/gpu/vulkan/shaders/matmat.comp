#version 450
// Fast mat-mat for prompt batches: y[t][o] = W[o] · x[t] over tiles of BM weight rows × BN
// activation rows (tokens) per workgroup, stepping along the rows one quantization
// superblock (256 values) at a time. Each step, the workgroup unpacks the tile's weights to
// int8 in shared memory (nibbles, high bits and lookup tables resolved once per weight, not
// once per token) and copies the activations' int8 codes beside them; then each invocation
// computes a TM × TN block of outputs from shared memory with packed 4 × int8 dot products
// (dotPacked4x8EXT where the device has VK_KHR_shader_integer_dot_product: INT_DOT).
//
// Quantized weights: each output's superblock value is formed exactly as the exact kernel
// (matmul.comp) and the CPU's scalar reference form it (the integer sums per sub-block, then
// the same float expression, `precise`), and the superblocks are added in order by one
// invocation: the result is bit for bit the exact kernel's. Float weights (F32/F16/BF16)
// accumulate in fp32 with fma (the exact kernel sums in float-float).
//
// MATMAT_ID (the routed experts of a prompt batch): z = expert e; the tile's tokens are
// entries [y·BN, ...) of e's list of pairs (moe_group.comp sorted the pairs by expert:
// offsets[e] .. offsets[e+1] in `order`); a pair's activation row is rows[pair] and its
// output row is y[pair]. Workgroups past the end of their expert's list exit at once.
#extension GL_EXT_control_flow_attributes : enable
#if defined(INT_DOT)
// OpSDotKHR on packed 4 × int8 (SPV_KHR_integer_dot_product), declared through SPIR-V
// intrinsics because Debian 12's glslang predates GL_EXT_integer_dot_product.
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_packed_4x8(uint a, uint b, spirv_literal int packed_vector_format);
#endif
#include "common.glsl"

layout(local_size_x = 64) in;  // TM × TN = 4 × 4 outputs per invocation, 8 × 8 invocations
#define BM 32u
#define BN 32u
#define TM 4u
#define TN 4u

layout(push_constant) uniform Push {
  uint n_in, n_out, n_tok;
  uint w_row_bytes, x_row_bytes;
  uint y_stride, y_offset;
  uint mat_bytes, mat_first, mat_count;  // MATMAT_ID: stack layout of this part
  uint accumulate;
  uint zero;  // always 0: opaque(), below
} p;
layout(std430, binding = 0) readonly buffer W { uint wd[]; };
layout(std430, binding = 1) readonly buffer X { uint xd[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Rows { uint rows[]; };       // MATMAT_ID: [pair] activation row
layout(std430, binding = 4) readonly buffer Offsets { uint offsets[]; }; // MATMAT_ID: [expert + 1]
layout(std430, binding = 5) readonly buffer Order { uint order[]; };     // MATMAT_ID: pairs sorted by expert

#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
#define FLOAT_WEIGHTS 1
#define KSTEP 64u  // values per step (floats in shared memory)
shared float w_s[BM][KSTEP];
shared float a_s[BN][KSTEP];
#else
#define KSTEP 256u
shared uint w_s[BM][KSTEP / 4u];  // int8 × 4 per word, value order
shared uint a_s[BN][KSTEP / 4u];
shared int w_sc[BM][16];          // per-row scales of the step (meaning per type, below)
shared float w_d[BM][8];          // per-row float scales of the step
shared float a_d[BN][8];          // per-token activation scales of the step
shared int a_bs[BN][16];          // Q8_K: per-token sums of 16 codes
#endif
shared uint s_xrow[BN];           // byte offset of each tile token's activation row (~0u: none)
shared uint s_yrow[BN];           // output row of each tile token

#define WB(o) BYTE_AT(wd, o)
uint w_u16(uint o) { return (wd[o >> 2u] >> ((o & 2u) << 3u)) & 0xFFFFu; }
uint w_u32(uint o) {
  const uint i = o >> 2u;
  return (o & 2u) == 0u ? wd[i] : (wd[i] >> 16u) | (wd[i + 1u] << 16u);
}
uint x_u16(uint o) { return (xd[o >> 2u] >> ((o & 2u) << 3u)) & 0xFFFFu; }
uint x_u32(uint o) {
  const uint i = o >> 2u;
  return (o & 2u) == 0u ? xd[i] : (xd[i] >> 16u) | (xd[i + 1u] << 16u);
}

// v itself, in a way the compiler cannot see through: a superblock's value is rounded on its
// own before it is added, as the exact kernel's (which stores it in shared memory first).
// Some compilers reassociate `sum + (plus - minus)` despite `precise` (llvmpipe does).
float opaque(float v) { return uintBitsToFloat(floatBitsToUint(v) ^ p.zero); }

int dot4(uint a, uint b) {
#if defined(INT_DOT)
  return sdot_packed_4x8(a, b, 0);  // 0: PackedVectorFormat4x8Bit
#else
  return bitfieldExtract(int(a), 0, 8) * bitfieldExtract(int(b), 0, 8) +
         bitfieldExtract(int(a), 8, 8) * bitfieldExtract(int(b), 8, 8) +
         bitfieldExtract(int(a), 16, 8) * bitfieldExtract(int(b), 16, 8) +
         bitfieldExtract(int(a), 24, 8) * bitfieldExtract(int(b), 24, 8);
#endif
}

#if defined(WTYPE_IQ4_XS)
const int kIQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
uint iq4_bytes(uint q, uint shift) {
  uint r = 0u;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) r |= (uint(kIQ4NL[(q >> (8u * k + shift)) & 0x0Fu]) & 0xFFu) << (8u * k);
  return r;
}
#endif

// Unpacks step `b` of weight row `row` (byte offset of the row: ro) into w_s[r], w_sc[r],
// w_d[r]: invocation part `i` of `n` cooperating on the row.
void load_weights(uint r, uint ro, uint b, uint i, uint n) {
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#if defined(WTYPE_Q4_K)
  const uint wo = ro + b * 144u, qs = wo + 16u;
#else
  const uint wo = ro + b * 176u, qh = wo + 16u, qs = wo + 48u;
#endif
  // 32 words of nibbles: word k = bytes 4k.. of group g = k / 8; low nibbles → sub-block 2g,
  // high → 2g + 1, values 4(k % 8) ...
  for (uint k = i; k < 32u; k += n) {
    const uint g = k >> 3u, c = k & 7u;
    const uint q = wd[(qs >> 2u) + k];
    uint lo = q & 0x0F0F0F0Fu, hi = (q >> 4u) & 0x0F0F0F0Fu;
#if defined(WTYPE_Q5_K)
    const uint h = wd[(qh >> 2u) + c];
    lo |= ((h >> (2u * g)) & 0x01010101u) << 4u;
    hi |= ((h >> (2u * g + 1u)) & 0x01010101u) << 4u;
#endif
    w_s[r][16u * g + c] = lo;
    w_s[r][16u * g + 8u + c] = hi;
  }
  if (i == 0u) {
    w_d[r][0] = f16_to_f32(w_u16(wo));
    w_d[r][1] = f16_to_f32(w_u16(wo + 2u));
    const uint so = wo + 4u;
    for (uint j = 0u; j < 8u; ++j) {
      uint sc, mn;
      if (j < 4u) {
        sc = WB(so + j) & 0x3Fu;
        mn = WB(so + j + 4u) & 0x3Fu;
      } else {
        const uint low = WB(so + j + 4u);
        sc = (low & 0x0Fu) | ((WB(so + j - 4u) >> 6u) << 4u);
        mn = (low >> 4u) | ((WB(so + j) >> 6u) << 4u);
      }
      w_sc[r][j] = int(sc);
      w_sc[r][8u + j] = int(mn);
    }
  }
#elif defined(WTYPE_Q6_K)
  const uint wo = ro + b * 210u;
  // Word k: half h = k / 32, quadrant qd = (k / 8) % 4, l = 4 (k % 8): values l .. l+3 of
  // the half's quadrant qd, minus 32.
  for (uint k = i; k < 64u; k += n) {
    const uint h = k >> 5u, qd = (k >> 3u) & 3u, l = 4u * (k & 7u);
    const uint ql = w_u32(wo + 64u * h + 32u * (qd & 1u) + l);
    const uint qhw = w_u32(wo + 128u + 32u * h + l);
    const uint q = ((ql >> (4u * (qd >> 1u))) & 0x0F0F0F0Fu) | (((qhw >> (2u * qd)) & 0x03030303u) << 4u);
    // q − 32 per byte: q < 64, so (q | 0x80) − 32 never borrows across bytes; then flip bit 7 back.
    w_s[r][k] = ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
  }
  if (i == 0u) {
    w_d[r][0] = f16_to_f32(w_u16(wo + 208u));
    for (uint s = 0u; s < 16u; ++s) w_sc[r][s] = sext8(WB(wo + 192u + s));
  }
#elif defined(WTYPE_IQ4_XS)
  const uint wo = ro + b * 136u;
  // Word k: sub-block j = k / 8; k % 8 < 4: low nibbles of bytes 4(k % 4) .. (values
  // 4(k % 4) ..), else high nibbles (values 16 + 4(k % 4) ..).
  for (uint k = i; k < 64u; k += n) {
    const uint j = k >> 3u, c = k & 7u;
    const uint q = wd[(wo >> 2u) + 2u + 4u * j + (c & 3u)];
    w_s[r][k] = iq4_bytes(q, c < 4u ? 0u : 4u);
  }
  if (i == 0u) {
    w_d[r][0] = f16_to_f32(w_u16(wo));
    const uint scales_h = w_u16(wo + 2u);
    for (uint j = 0u; j < 8u; ++j) {
      w_sc[r][j] = int(((WB(wo + 4u + j / 2u) >> (4u * (j % 2u))) & 0x0Fu) | (((scales_h >> (2u * j)) & 3u) << 4u)) - 32;
    }
  }
#elif defined(WTYPE_Q8_0)
  // 8 blocks of 34 bytes: word k = block k / 8, values 4(k % 8) ..
  for (uint k = i; k < 64u; k += n) {
    const uint bo = ro + (8u * b + (k >> 3u)) * 34u;
    w_s[r][k] = w_u32(bo + 2u + 4u * (k & 7u));
  }
  if (i == 0u) {
    for (uint q = 0u; q < 8u; ++q) w_d[r][q] = f16_to_f32(w_u16(ro + (8u * b + q) * 34u));
  }
#elif defined(WTYPE_Q4_0)
  // 8 blocks of 18 bytes: word k = block k / 8, c = k % 8: c < 4 low nibbles of bytes
  // 4c .. (values 4c ..), else high nibbles of bytes 4(c − 4) .. (values 16 + 4(c − 4) ..); −8.
  for (uint k = i; k < 64u; k += n) {
    const uint bo = ro + (8u * b + (k >> 3u)) * 18u, c = k & 7u;
    const uint q = w_u32(bo + 2u + 4u * (c & 3u));
    const uint v = c < 4u ? q & 0x0F0F0F0Fu : (q >> 4u) & 0x0F0F0F0Fu;
    w_s[r][k] = ((v | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
  }
  if (i == 0u) {
    for (uint q = 0u; q < 8u; ++q) w_d[r][q] = f16_to_f32(w_u16(ro + (8u * b + q) * 18u));
  }
#elif defined(WTYPE_F32)
  for (uint k = i; k < KSTEP; k += n) w_s[r][k] = uintBitsToFloat(wd[(ro >> 2u) + b * KSTEP + k]);
#elif defined(WTYPE_F16)
  for (uint k = i; k < KSTEP; k += n) w_s[r][k] = f16_to_f32(w_u16(ro + 2u * (b * KSTEP + k)));
#elif defined(WTYPE_BF16)
  for (uint k = i; k < KSTEP; k += n) w_s[r][k] = bf16_to_f32(w_u16(ro + 2u * (b * KSTEP + k)));
#endif
}

// Copies step `b` of the activation row at byte xo into a_s[c] (and its scales).
void load_activations(uint c, uint xo, uint b, uint i, uint n) {
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K) || defined(WTYPE_IQ4_XS)
  const uint bo = xo + b * 292u;  // Q8_K: d, 256 codes, 16 int16 sums
  for (uint k = i; k < 64u; k += n) a_s[c][k] = xd[(bo >> 2u) + 1u + k];
  if (i == 0u) {
    a_d[c][0] = uintBitsToFloat(xd[bo >> 2u]);
    for (uint s = 0u; s < 8u; ++s) {
      const uint w = xd[(bo >> 2u) + 65u + s];
      a_bs[c][2u * s] = sext16(w & 0xFFFFu);
      a_bs[c][2u * s + 1u] = sext16(w >> 16u);
    }
  }
#elif defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
  for (uint k = i; k < 64u; k += n) a_s[c][k] = x_u32(xo + (8u * b + (k >> 3u)) * 34u + 2u + 4u * (k & 7u));
  if (i == 0u) {
    for (uint q = 0u; q < 8u; ++q) a_d[c][q] = f16_to_f32(x_u16(xo + (8u * b + q) * 34u));
  }
#elif defined(WTYPE_F32)
  for (uint k = i; k < KSTEP; k += n) a_s[c][k] = uintBitsToFloat(xd[(xo >> 2u) + b * KSTEP + k]);
#elif defined(WTYPE_F16)
  for (uint k = i; k < KSTEP; k += n) a_s[c][k] = f16_to_f32(x_u16(xo + 2u * (b * KSTEP + k)));
#elif defined(WTYPE_BF16)
  for (uint k = i; k < KSTEP; k += n) a_s[c][k] = bf16_to_f32(x_u16(xo + 2u * (b * KSTEP + k)));
#endif
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint tr = t % (BM / TM), tc = t / (BM / TM);  // this invocation's rows tr·TM.., tokens tc·TN..
  const uint row0 = gl_WorkGroupID.x * BM;
  const uint tile = gl_WorkGroupID.y;
#if defined(MATMAT_ID)
  const uint e = gl_WorkGroupID.z;
  if (e < p.mat_first || e >= p.mat_first + p.mat_count) return;  // in another part of the stack
  const uint first = offsets[e] + tile * BN, end = offsets[e + 1u];
  if (first >= end) return;
  const uint w_base = (e - p.mat_first) * p.mat_bytes;
  if (t < BN) {
    const uint k = first + t;
    s_xrow[t] = k < end ? rows[order[k]] * p.x_row_bytes : ~0u;
    s_yrow[t] = k < end ? order[k] : 0u;
  }
#else
  const uint w_base = 0u;
  if (t < BN) {
    const uint tok = tile * BN + t;
    s_xrow[t] = tok < p.n_tok ? tok * p.x_row_bytes : ~0u;
    s_yrow[t] = tok;
  }
#endif
  barrier();

  float sum[TM][TN];
  [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) sum[a][c] = 0.0;
  const uint steps = p.n_in / KSTEP;
  for (uint b = 0u; b < steps; ++b) {
    // Load: 2 invocations per weight row and per token (64 invocations, 32 + 32 rows).
    {
      const uint r = t >> 1u, part = t & 1u;
      const uint row = min(row0 + r, p.n_out - 1u);
      load_weights(r, w_base + row * p.w_row_bytes, b, part, 2u);
      const uint xo = s_xrow[r];
      load_activations(r, xo == ~0u ? s_xrow[0] : xo, b, part, 2u);
    }
    barrier();
#if defined(FLOAT_WEIGHTS)
    for (uint k = 0u; k < KSTEP; ++k) {
      float wv[TM], av[TN];
      [[unroll]] for (uint a = 0u; a < TM; ++a) wv[a] = w_s[tr * TM + a][k];
      [[unroll]] for (uint c = 0u; c < TN; ++c) av[c] = a_s[tc * TN + c][k];
      [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) sum[a][c] = fma(wv[a], av[c], sum[a][c]);
    }
#else
    // Integer sums per 16 values (one Q8_K sum of 16; half a sub-block of 32).
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_IQ4_XS)
    int scaled[TM][TN];
    [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) scaled[a][c] = 0;
    for (uint j = 0u; j < 8u; ++j) {  // sub-blocks of 32
      int is[TM][TN];
      [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] = 0;
      [[unroll]] for (uint k = 0u; k < 8u; ++k) {
        uint wv[TM], av[TN];
        [[unroll]] for (uint a = 0u; a < TM; ++a) wv[a] = w_s[tr * TM + a][8u * j + k];
        [[unroll]] for (uint c = 0u; c < TN; ++c) av[c] = a_s[tc * TN + c][8u * j + k];
        [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] += dot4(wv[a], av[c]);
      }
      [[unroll]] for (uint a = 0u; a < TM; ++a) {
        const int sc = w_sc[tr * TM + a][j];
        [[unroll]] for (uint c = 0u; c < TN; ++c) scaled[a][c] += sc * is[a][c];
      }
    }
    [[unroll]] for (uint a = 0u; a < TM; ++a) {
      const uint r = tr * TM + a;
      [[unroll]] for (uint c = 0u; c < TN; ++c) {
        const uint tok = tc * TN + c;
        const float d = w_d[r][0], da = a_d[tok][0];
#if defined(WTYPE_IQ4_XS)
        precise float v = d * da * float(scaled[a][c]);
#else
        int mins = 0;
        [[unroll]] for (uint j = 0u; j < 8u; ++j) mins += w_sc[r][8u + j] * (a_bs[tok][2u * j] + a_bs[tok][2u * j + 1u]);
        const float dmin = w_d[r][1];
        // Step by step, each rounded (no fused multiply-add), as the exact kernel's
        // d * da * float(scaled) - dmin * da * float(mins).
        precise float dd = d * da;
        precise float plus = dd * float(scaled[a][c]);
        precise float dm = dmin * da;
        precise float minus = dm * float(mins);
        precise float v = plus - minus;
#endif
        precise float s = sum[a][c] + opaque(v);
        sum[a][c] = s;
      }
    }
#elif defined(WTYPE_Q6_K)
    int scaled[TM][TN];
    [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) scaled[a][c] = 0;
    for (uint u = 0u; u < 16u; ++u) {  // units of 16 values, each with its own scale
      int is[TM][TN];
      [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] = 0;
      [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        uint wv[TM], av[TN];
        [[unroll]] for (uint a = 0u; a < TM; ++a) wv[a] = w_s[tr * TM + a][4u * u + k];
        [[unroll]] for (uint c = 0u; c < TN; ++c) av[c] = a_s[tc * TN + c][4u * u + k];
        [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] += dot4(wv[a], av[c]);
      }
      [[unroll]] for (uint a = 0u; a < TM; ++a) {
        const int sc = w_sc[tr * TM + a][u];
        [[unroll]] for (uint c = 0u; c < TN; ++c) scaled[a][c] += sc * is[a][c];
      }
    }
    [[unroll]] for (uint a = 0u; a < TM; ++a) {
      [[unroll]] for (uint c = 0u; c < TN; ++c) {
        precise float v = w_d[tr * TM + a][0] * a_d[tc * TN + c][0] * float(scaled[a][c]);
        precise float s = sum[a][c] + opaque(v);
        sum[a][c] = s;
      }
    }
#elif defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
    for (uint q = 0u; q < 8u; ++q) {  // blocks of 32, in order
      int is[TM][TN];
      [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] = 0;
      [[unroll]] for (uint k = 0u; k < 8u; ++k) {
        uint wv[TM], av[TN];
        [[unroll]] for (uint a = 0u; a < TM; ++a) wv[a] = w_s[tr * TM + a][8u * q + k];
        [[unroll]] for (uint c = 0u; c < TN; ++c) av[c] = a_s[tc * TN + c][8u * q + k];
        [[unroll]] for (uint a = 0u; a < TM; ++a) [[unroll]] for (uint c = 0u; c < TN; ++c) is[a][c] += dot4(wv[a], av[c]);
      }
      [[unroll]] for (uint a = 0u; a < TM; ++a) {
        [[unroll]] for (uint c = 0u; c < TN; ++c) {
          precise float dd = w_d[tr * TM + a][q] * a_d[tc * TN + c][q];
          precise float v = float(is[a][c]) * dd;
          precise float s = sum[a][c] + opaque(v);
          sum[a][c] = s;
        }
      }
    }
#endif
#endif
    barrier();
  }

  [[unroll]] for (uint a = 0u; a < TM; ++a) {
    const uint row = row0 + tr * TM + a;
    if (row >= p.n_out) continue;
    [[unroll]] for (uint c = 0u; c < TN; ++c) {
      const uint k = tc * TN + c;
      if (s_xrow[k] == ~0u) continue;
      const uint o = s_yrow[k] * p.y_stride + p.y_offset + row;
      y[o] = p.accumulate != 0u ? y[o] + sum[a][c] : sum[a][c];
    }
  }
}
