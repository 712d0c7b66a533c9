// The fast kernels' view of a weight block: TPB invocations ("lanes") share one block, and
// LANE_DOT(lane, weight block at byte wo, activation block at byte xo) returns that lane's
// share of the block's contribution to the dot product, so that the sum over the block's
// lanes is the block's value. Loads are 32-bit words (blocks that are only 2-byte aligned,
// Q8_0 34 B, Q4_0 18 B, Q6_K 210 B, are read as two words and shifted), never bytes.
// Integer products are exact; each lane turns its integer partial sums into one float with
// the block's scales, so a block's value differs from the exact kernel's (one float per
// block) only by float rounding of the partial products.
//
// Before including: define exactly one WTYPE_*, WD (the name of the weight words array)
// and LANE_DOT (the function's name); the activation words array is xd[]. A shader may
// include this file twice with another WD/LANE_DOT (matvec's SwiGLU reads two weights).
// Provides TPB (lanes per block), BLOCK (weights per block), W_BLOCK_BYTES and
// X_BLOCK_BYTES (activation block bytes: Q8_K 292, Q8_0 34, f32 128, f16/bf16 64).

#define W_U32(o) ((((o) & 2u) == 0u) ? WD[(o) >> 2u] : ((WD[(o) >> 2u] >> 16u) | (WD[((o) >> 2u) + 1u] << 16u)))
#define W_U16(o) ((WD[(o) >> 2u] >> (((o) & 2u) << 3u)) & 0xFFFFu)

#ifndef LANE_DOT_HELPERS
#define LANE_DOT_HELPERS
// 4 activation bytes at a byte offset that is a multiple of 2.
uint x_u32(uint o) {
  const uint i = o >> 2u;
  return (o & 2u) == 0u ? xd[i] : (xd[i] >> 16u) | (xd[i + 1u] << 16u);
}
// The u16 at an even byte offset.
uint x_u16(uint o) { return (xd[o >> 2u] >> ((o & 2u) << 3u)) & 0xFFFFu; }

// Σ of the 4 signed bytes of a times the 4 signed bytes of b.
int dot4_ss(uint a, uint b) {
  return bitfieldExtract(int(a), 0, 8) * bitfieldExtract(int(b), 0, 8) +
         bitfieldExtract(int(a), 8, 8) * bitfieldExtract(int(b), 8, 8) +
         bitfieldExtract(int(a), 16, 8) * bitfieldExtract(int(b), 16, 8) +
         bitfieldExtract(int(a), 24, 8) * bitfieldExtract(int(b), 24, 8);
}
// Σ of the 4 unsigned bytes of a (each < 128) times the 4 signed bytes of b.
int dot4_us(uint a, uint b) { return dot4_ss(a, b); }

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// 6-bit scale (x) and min (y) of sub-blocks j and j+1 (j even) from the 3 scale words.
uvec4 scale_min_pair(uvec3 s, uint j) {
  // Bytes 0..11 of the packed scales.
  const uint b[12] = uint[12](s.x & 0xFFu, (s.x >> 8u) & 0xFFu, (s.x >> 16u) & 0xFFu, s.x >> 24u, s.y & 0xFFu,
                              (s.y >> 8u) & 0xFFu, (s.y >> 16u) & 0xFFu, s.y >> 24u, s.z & 0xFFu, (s.z >> 8u) & 0xFFu,
                              (s.z >> 16u) & 0xFFu, s.z >> 24u);
  uvec4 r;
  [[unroll]] for (uint k = 0u; k < 2u; ++k) {
    const uint jj = j + k;
    uint sc, mn;
    if (jj < 4u) {
      sc = b[jj] & 0x3Fu;
      mn = b[jj + 4u] & 0x3Fu;
    } else {
      sc = (b[jj + 4u] & 0x0Fu) | ((b[jj - 4u] >> 6u) << 4u);
      mn = (b[jj + 4u] >> 4u) | ((b[jj] >> 6u) << 4u);
    }
    if (k == 0u) r.xy = uvec2(sc, mn); else r.zw = uvec2(sc, mn);
  }
  return r;
}
#endif

#if defined(WTYPE_IQ4_XS)
const int kIQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
// The 4 non-linear values of the 4 nibbles (low or high) of q, as 4 signed bytes.
uint iq4_bytes(uint q, uint shift) {
  uint r = 0u;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) r |= (uint(kIQ4NL[(q >> (8u * k + shift)) & 0x0Fu]) & 0xFFu) << (8u * k);
  return r;
}
#endif
#if defined(WTYPE_F16) || defined(WTYPE_BF16)
vec2 unpack2(uint v) {
#if defined(WTYPE_F16)
  return unpackHalf2x16(v);
#else
  return vec2(uintBitsToFloat(v << 16u), uintBitsToFloat(v & 0xFFFF0000u));
#endif
}
#endif
#endif  // LANE_DOT_HELPERS

#undef TPB
#undef BLOCK
#undef W_BLOCK_BYTES
#undef X_BLOCK_BYTES
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#define TPB 16u
#define BLOCK 256u
#define X_BLOCK_BYTES 292u
#if defined(WTYPE_Q4_K)
#define W_BLOCK_BYTES 144u
#else
#define W_BLOCK_BYTES 176u
#endif
// Lane (g = lane / 4, p = lane % 4) takes bytes 8p .. 8p+7 of the g-th 32-byte group of
// nibbles: values 8p .. 8p+7 of sub-blocks 2g (low nibbles) and 2g+1 (high nibbles). The
// mins term of sub-blocks 2g, 2g+1 (over the activation's sums of 16) goes to lane p = 0.
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint g = lane >> 2u, p = lane & 3u;
  const uint w0 = wo >> 2u;
  const vec2 dm = unpackHalf2x16(WD[w0]);  // d, dmin
  const uvec4 sm = scale_min_pair(uvec3(WD[w0 + 1u], WD[w0 + 2u], WD[w0 + 3u]), 2u * g);
#if defined(WTYPE_Q4_K)
  const uint qw = w0 + 4u + 8u * g + 2u * p;  // word of the nibbles
#else
  const uint qw = w0 + 12u + 8u * g + 2u * p;
  const uint hw = w0 + 4u + 2u * p;           // qh bytes 8p .. 8p+7
#endif
  const uint xw = (xo >> 2u) + 1u + 16u * g + 2u * p;  // codes of sub-block 2g, values 8p..
  int lo = 0, hi = 0;
  [[unroll]] for (uint k = 0u; k < 2u; ++k) {
    const uint q = WD[qw + k];
    uint ql = q & 0x0F0F0F0Fu, qh = (q >> 4u) & 0x0F0F0F0Fu;
#if defined(WTYPE_Q5_K)
    const uint h = WD[hw + k];
    ql |= ((h >> (2u * g)) & 0x01010101u) << 4u;
    qh |= ((h >> (2u * g + 1u)) & 0x01010101u) << 4u;
#endif
    lo += dot4_us(ql, xd[xw + k]);
    hi += dot4_us(qh, xd[xw + 8u + k]);
  }
  const float da = uintBitsToFloat(xd[xo >> 2u]);
  float v = dm.x * da * float(int(sm.x) * lo + int(sm.z) * hi);
  if (p == 0u) {
    // bsums 4g .. 4g+3 (int16 pairs at byte 260 + 8g).
    const uint b0 = xd[(xo >> 2u) + 65u + 2u * g], b1 = xd[(xo >> 2u) + 66u + 2u * g];
    const int s_lo = bitfieldExtract(int(b0), 0, 16) + bitfieldExtract(int(b0), 16, 16);
    const int s_hi = bitfieldExtract(int(b1), 0, 16) + bitfieldExtract(int(b1), 16, 16);
    v -= dm.y * da * float(int(sm.y) * s_lo + int(sm.w) * s_hi);
  }
  return v;
}
#elif defined(WTYPE_Q6_K)
#define TPB 16u
#define BLOCK 256u
#define X_BLOCK_BYTES 292u
#define W_BLOCK_BYTES 210u
// Lane (h = lane / 8, c = lane % 8) takes l = 4c .. 4c+3 of half h: the four values l,
// l+32, l+64, l+96 of the half (ql bytes l and l+32, qh byte l), whose scales are
// sc[8h + l/16 + 0, 2, 4, 6].
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint h = lane >> 3u, c = lane & 7u;
  const uint l = 4u * c;
  const uint ql0 = W_U32(wo + 64u * h + l), ql1 = W_U32(wo + 64u * h + 32u + l);
  const uint qh = W_U32(wo + 128u + 32u * h + l);
  // Scales: bytes 8h + s, s = l/16 + {0,2,4,6}.
  const uint s_base = wo + 192u + 8u * h + (l >> 4u);
  const uint s01 = W_U16(s_base & ~1u), s23 = W_U16((s_base + 2u) & ~1u), s45 = W_U16((s_base + 4u) & ~1u),
             s67 = W_U16((s_base + 6u) & ~1u);
  const uint sh = (s_base & 1u) * 8u;
  const int sc0 = bitfieldExtract(int(s01 >> sh), 0, 8), sc1 = bitfieldExtract(int(s23 >> sh), 0, 8),
            sc2 = bitfieldExtract(int(s45 >> sh), 0, 8), sc3 = bitfieldExtract(int(s67 >> sh), 0, 8);
  const uint q1 = (ql0 & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4u);
  const uint q2 = (ql1 & 0x0F0F0F0Fu) | (((qh >> 2u) & 0x03030303u) << 4u);
  const uint q3 = ((ql0 >> 4u) & 0x0F0F0F0Fu) | (((qh >> 4u) & 0x03030303u) << 4u);
  const uint q4 = ((ql1 >> 4u) & 0x0F0F0F0Fu) | (((qh >> 6u) & 0x03030303u) << 4u);
  const uint xw = (xo >> 2u) + 1u + 32u * h + c;  // codes of the half's value l
  // Codes are 0..63 with an offset of 32: Σ (q − 32)·a = Σ q·a − 32·Σ a.
  const uint a1 = xd[xw], a2 = xd[xw + 8u], a3 = xd[xw + 16u], a4 = xd[xw + 24u];
  const int i1 = dot4_us(q1, a1) - 32 * dot4_ss(0x01010101u, a1);
  const int i2 = dot4_us(q2, a2) - 32 * dot4_ss(0x01010101u, a2);
  const int i3 = dot4_us(q3, a3) - 32 * dot4_ss(0x01010101u, a3);
  const int i4 = dot4_us(q4, a4) - 32 * dot4_ss(0x01010101u, a4);
  const float d = unpackHalf2x16(W_U16(wo + 208u)).x;
  const float da = uintBitsToFloat(xd[xo >> 2u]);
  return d * da * float(sc0 * i1 + sc1 * i2 + sc2 * i3 + sc3 * i4);
}
#elif defined(WTYPE_IQ4_XS)
#define TPB 16u
#define BLOCK 256u
#define X_BLOCK_BYTES 292u
#define W_BLOCK_BYTES 136u
// Lane (j = lane / 2, p = lane % 2) takes bytes 8p .. 8p+7 of sub-block j's 16: values
// 8p .. 8p+7 (low nibbles) and 16 + 8p .. (high nibbles).
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint j = lane >> 1u, p = lane & 1u;
  const uint w0 = wo >> 2u;
  const uint head = WD[w0];  // d (f16) | scales_h (u16)
  const uint sl = (WD[w0 + 1u] >> (8u * (j >> 1u) + 4u * (j & 1u))) & 0x0Fu;
  const int ls = int(sl | (((head >> (16u + 2u * j)) & 3u) << 4u)) - 32;
  const uint qw = w0 + 2u + 4u * j + 2u * p;
  const uint xw = (xo >> 2u) + 1u + 8u * j + 2u * p;
  int s = 0;
  [[unroll]] for (uint k = 0u; k < 2u; ++k) {
    const uint q = WD[qw + k];
    s += dot4_ss(iq4_bytes(q, 0u), xd[xw + k]) + dot4_ss(iq4_bytes(q, 4u), xd[xw + 4u + k]);
  }
  const float d = unpackHalf2x16(head).x;
  return d * uintBitsToFloat(xd[xo >> 2u]) * float(ls * s);
}
#elif defined(WTYPE_Q8_0)
#define TPB 4u
#define BLOCK 32u
#define X_BLOCK_BYTES 34u
#define W_BLOCK_BYTES 34u
// Lane l takes values 8l .. 8l+7.
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint o = 2u + 8u * lane;
  const int s = dot4_ss(W_U32(wo + o), x_u32(xo + o)) + dot4_ss(W_U32(wo + o + 4u), x_u32(xo + o + 4u));
  return float(s) * (unpackHalf2x16(W_U16(wo)).x * unpackHalf2x16(x_u16(xo)).x);
}
#elif defined(WTYPE_Q4_0)
#define TPB 4u
#define BLOCK 32u
#define X_BLOCK_BYTES 34u
#define W_BLOCK_BYTES 18u
// Lane l takes weight bytes 4l .. 4l+3: values 4l .. 4l+3 (low nibbles) and 16 + 4l ...
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint q = W_U32(wo + 2u + 4u * lane);
  const uint lo = q & 0x0F0F0F0Fu, hi = (q >> 4u) & 0x0F0F0F0Fu;
  const uint a_lo = x_u32(xo + 2u + 4u * lane), a_hi = x_u32(xo + 18u + 4u * lane);
  // Codes are 0..15 with an offset of 8.
  const int s = dot4_us(lo, a_lo) + dot4_us(hi, a_hi) - 8 * (dot4_ss(0x01010101u, a_lo) + dot4_ss(0x01010101u, a_hi));
  return float(s) * (unpackHalf2x16(W_U16(wo)).x * unpackHalf2x16(x_u16(xo)).x);
}
#elif defined(WTYPE_F32)
#define TPB 8u
#define BLOCK 32u
#define X_BLOCK_BYTES 128u
#define W_BLOCK_BYTES 128u
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint w = (wo >> 2u) + 4u * lane, x = (xo >> 2u) + 4u * lane;
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) s = fma(uintBitsToFloat(WD[w + k]), uintBitsToFloat(xd[x + k]), s);
  return s;
}
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
#define TPB 8u
#define BLOCK 32u
#define X_BLOCK_BYTES 64u
#define W_BLOCK_BYTES 64u
float LANE_DOT(uint lane, uint wo, uint xo) {
  const uint w = (wo >> 2u) + 2u * lane, x = (xo >> 2u) + 2u * lane;
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < 2u; ++k) {
    const vec2 a = unpack2(WD[w + k]), b = unpack2(xd[x + k]);
    s = fma(a.x, b.x, s);
    s = fma(a.y, b.y, s);
  }
  return s;
}
#endif
