// Quantizing one f32 row to the CPU's activation blocks, for one workgroup of 64
// invocations (t = gl_LocalInvocationID.x): quantize.comp, and the RMS norm that writes its
// output's conversions too (norm.comp NORM_RMS_QUANT). Before including, define QX (the f32
// array read), QY_K (words Q8_K rows go to) and/or QY_0 (words Q8_0 rows go to).
//   Q8_K: blocks of 256: m = the element of largest magnitude (first on ties),
//         s = -127 / m, q = min(127, round_half_even(s·x)), d = 1 / s, bsums of 16.
//   Q8_0: blocks of 32: a = max|x|, d = fp16(a / 127), q = round_half_even(x · (127 / a)).
// Both round exactly like the CPU (src/tensor/types/q8_k.cpp, q8_0.cpp).

#if defined(QY_K)
shared float s_mag[64];
shared uint s_idx[64];
shared int s_qsum[64];
// Row of n_in elements at QX[xb] → Q8_K blocks from word yw of QY_K.
void quantize_row_q8_k(uint xb, uint yw, uint n_in, uint t) {
  for (uint b = 0u; b < n_in / 256u; ++b) {
    const uint base = xb + b * 256u + t * 4u;
    float v[4];
    float best = 0.0;
    uint best_idx = 0xFFFFFFFFu;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[i] = QX[base + i];
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
      if (t == 0u) QY_K[block_word] = 0u;
    } else {
      const float m = QX[xb + b * 256u + s_idx[0]];
      const float iscale = div_rn(-127.0, m);
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        precise float scaled = iscale * v[i];
        codes[i] = min(127, int(roundEven(scaled)));
      }
      if (t == 0u) QY_K[block_word] = floatBitsToUint(div_rn(1.0, iscale));
    }
    QY_K[block_word + 1u + t] = (uint(codes[0]) & 0xFFu) | ((uint(codes[1]) & 0xFFu) << 8u) |
                             ((uint(codes[2]) & 0xFFu) << 16u) | ((uint(codes[3]) & 0xFFu) << 24u);
    s_qsum[t] = codes[0] + codes[1] + codes[2] + codes[3];
    barrier();
    if (t < 8u) {  // groups 2t and 2t+1 of 16 codes = threads 8t .. 8t+7
      const int g0 = s_qsum[8u * t] + s_qsum[8u * t + 1u] + s_qsum[8u * t + 2u] + s_qsum[8u * t + 3u];
      const int g1 = s_qsum[8u * t + 4u] + s_qsum[8u * t + 5u] + s_qsum[8u * t + 6u] + s_qsum[8u * t + 7u];
      QY_K[block_word + 65u + t] = (uint(g0) & 0xFFFFu) | (uint(g1) << 16u);
    }
    barrier();
  }
}
#endif

#if defined(QY_0)
shared uint s_d16[2048];
shared float s_mul[2048];
// Row of n_in elements (n_in / 32 ≤ 2048 blocks) at QX[xb] → Q8_0 blocks from word yw of QY_0.
void quantize_row_q8_0(uint xb, uint yw, uint n_in, uint t) {
  const uint nb = n_in / 32u;
  for (uint b = t; b < nb; b += 64u) {
    float a = 0.0;
    for (uint j = 0u; j < 32u; ++j) a = max(a, abs(QX[xb + b * 32u + j]));
    s_d16[b] = f32_to_f16(div_rn(a, 127.0));
    s_mul[b] = a != 0.0 ? div_rn(127.0, a) : 0.0;
  }
  barrier();
  const uint n_words = (nb * 34u + 3u) / 4u;
  for (uint w = t; w < n_words; w += 64u) {
    uint word = 0u;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint out_byte = 4u * w + k;
      const uint bi = out_byte / 34u, within = out_byte % 34u;
      uint byte_ = 0u;
      if (bi < nb) {
        if (within < 2u) {
          byte_ = (s_d16[bi] >> (8u * within)) & 0xFFu;
        } else {
          precise float scaled = QX[xb + bi * 32u + within - 2u] * s_mul[bi];
          byte_ = uint(int(roundEven(scaled))) & 0xFFu;
        }
      }
      word |= byte_ << (8u * k);
    }
    QY_0[yw + w] = word;
  }
}
#endif
