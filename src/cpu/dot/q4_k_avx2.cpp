// Q4_K · Q8_K with AVX2, one activation row (q4_k_q8_k_avx2) or up to kMaxDotRows of them
// (q4_k_q8_k_avx2_multi). Same arithmetic as q4_k_q8_k_scalar: per super-block and row the
// integer sums Σ_j sc_j·(q_w·q_a)_j and Σ_j m_j·(Σ q_a)_j are exact int32, and the float
// scaling is the reference's expression, evaluated per row in lane r of a float vector
// (IEEE lane-wise, no contraction), so every row is bit-identical to the scalar kernel.
//
// Integer ranges: _mm256_maddubs_epi16 multiplies the unsigned 4-bit codes (≤ 15) by the
// signed activations (|q_a| ≤ 128) and adds pairs: |pair| ≤ 2·15·128 = 3840, far from the
// int16 saturation at 32767. _mm256_madd_epi16 with the 6-bit scale (≤ 63) then gives int32
// pairs ≤ 2·3840·63; the whole block is ≤ 256·15·128·63 ≈ 3.1e7 < 2^31. The mins use the
// Q8_K bsums (|bsum| ≤ 16·128): madd with m (≤ 63) pairs ≤ 2.6e5, block ≤ 1.1e6.
//
// Multi-row: the codes of a 64-element chunk and the sub-block scales are unpacked once and
// used for every row; each row has one int32x8 accumulator for the codes and one for the
// mins, so 4 rows take 8 of the 16 ymm registers.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

template <int R>
struct Q4KRows {
  static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const MOETIER_DOT_NS::Rows<BlockQ8_K, R> y(a, stride);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const MOETIER_DOT_NS::KScaleMin s = MOETIER_DOT_NS::unpack_k_scale_min(x[b].scales);
      __m256i acc[R], min_acc[R];
      MOETIER_DOT_NS::k_start_block<R>(s, y, b, acc, min_acc);
      // qs[32k .. 32k+31]: low nibbles are sub-block 2k, high nibbles sub-block 2k+1.
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * k));
        const __m256i q_lo = _mm256_and_si256(q, low_nibble);
        const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibble);
        MOETIER_DOT_NS::k_add_pair<R>(s, y, b, k, q_lo, q_hi, acc);
      }
      // Reference: sum += d·d_a·scaled − dmin·d_a·mins, per row.
      sum = _mm_add_ps(sum, MOETIER_DOT_NS::k_block_terms<R>(acc, min_acc, y, b, x[b].d, x[b].dmin));
    }
    MOETIER_DOT_NS::store_rows<R>(sum, out);
  }
};

}  // namespace

float MOETIER_DOT_KERNEL(q4_k_q8_k)(int64_t n, const void* w, const void* a) {
  float out;
  Q4KRows<1>::run(n, w, a, 0, &out);
  return out;
}

void MOETIER_DOT_KERNEL_MULTI(q4_k_q8_k)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::dispatch_rows<Q4KRows>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
