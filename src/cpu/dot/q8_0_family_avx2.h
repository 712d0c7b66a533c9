// The AVX2 kernels of the weight families dotted with Q8_0 activations (Q8_0, Q4_0): they
// differ only in how a block's 32 signed weights are formed, F::weights(block). Per block
// the integer sum is exact (int32 lanes, then an exact horizontal add) and the float
// scaling and accumulation are the scalar reference's, in block order, so every row is
// bit-identical to it. (Accumulating in 8 float lanes would be faster but changes the
// rounding; with that variant the end-to-end logit test against llama.cpp failed.)
//
// _mm256_maddubs_epi16 needs one unsigned operand: |w| is paired with q_a carrying w's sign
// (_mm256_sign_epi8), exact because activations are in [−127, 127] (the Q8_0 quantizer
// never writes −128) and |w| ≤ 128: pairs ≤ 2·128·127 = 32512 < 32767, no saturation.
//
// Multi-row: w and |w| are formed once per block for all rows; the rows' block sums come
// out of one horizontal-add tree and are scaled in the lanes of one float vector (lane
// r = row r, the reference's expression, no contraction). Only for *_avx2.cpp units.
#pragma once

#include "cpu/dot/avx2_util.h"

namespace moetier::cpu::dot::MOETIER_DOT_NS {

// 8 int32 lanes whose total is Σ_j w[j]·q_a[j] over one block; abs_w = |w|.
inline __m256i q8_block_lanes(__m256i w, __m256i abs_w, const int8_t* qa_ptr) {
  const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa_ptr));
  return dot_u8s8(abs_w, _mm256_sign_epi8(qa, w));
}

template <class F>
inline __m256i q8_block_lanes(const typename F::WBlock& x, const BlockQ8_0& y) {
  const __m256i w = F::weights(x);
  return q8_block_lanes(w, _mm256_sign_epi8(w, w), y.qs);
}

template <class F>
inline float q8_family_single(int64_t n, const void* wp, const void* a) {
  const auto* x = static_cast<const typename F::WBlock*>(wp);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t n_blocks = n / kQK8_0;
  float sum = 0;
  int64_t b = 0;
  // Four blocks at a time: one horizontal-add tree turns their 4×8 lanes into the 4 exact
  // block sums, then the float scaling runs per block in order, as in the reference.
  for (; b + 4 <= n_blocks; b += 4) {
    alignas(16) int32_t isum[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(isum),
                    hsum4_i32(q8_block_lanes<F>(x[b], y[b]), q8_block_lanes<F>(x[b + 1], y[b + 1]),
                              q8_block_lanes<F>(x[b + 2], y[b + 2]), q8_block_lanes<F>(x[b + 3], y[b + 3])));
    for (int k = 0; k < 4; ++k) sum += static_cast<float>(isum[k]) * (f16(x[b + k].d) * f16(y[b + k].d));
  }
  for (; b < n_blocks; ++b) {
    const int32_t isum = hsum_i32(q8_block_lanes<F>(x[b], y[b]));
    sum += static_cast<float>(isum) * (f16(x[b].d) * f16(y[b].d));
  }
  return sum;
}

template <class F>
struct Q8FamilyRows {
  template <int R>
  struct Kernel {
    static void run(int64_t n, const void* wp, const void* a, int64_t stride, float* out) {
      const auto* x = static_cast<const typename F::WBlock*>(wp);
      const Rows<BlockQ8_0, R> y(a, stride);
      __m128 sum = _mm_setzero_ps();
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const __m256i w = F::weights(x[b]);
        const __m256i abs_w = _mm256_sign_epi8(w, w);
        __m256i lanes[R];
        for (int r = 0; r < R; ++r) lanes[r] = q8_block_lanes(w, abs_w, y.p[r][b].qs);
        const __m128i isum = hsum_rows<R>(lanes);
        // Reference: sum += isum · (d_w · d_a), per row.
        const __m128 d = _mm_mul_ps(_mm_set1_ps(f16(x[b].d)), q8_0_scales<R>(y, b));
        sum = _mm_add_ps(sum, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
      }
      store_rows<R>(sum, out);
    }
  };
};

template <class F>
inline void q8_family_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  if (n_act == 1) {
    out[0] = q8_family_single<F>(n, w, a);
    return;
  }
  dispatch_rows<Q8FamilyRows<F>::template Kernel>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot::MOETIER_DOT_NS
