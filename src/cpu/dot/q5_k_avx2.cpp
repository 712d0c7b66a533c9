// Q5_K · Q8_K with AVX2, one activation row (q5_k_q8_k_avx2) or up to kMaxDotRows of them
// (q5_k_q8_k_avx2_multi). Same arithmetic as q5_k_q8_k_scalar: per super-block and row the
// integer sums Σ_j sc_j·(q_w·q_a)_j and Σ_j m_j·(Σ q_a)_j are exact int32, and the float
// scaling is the reference's expression, evaluated per row in lane r of a float vector
// (IEEE lane-wise, no contraction), so every row is bit-identical to the scalar kernel.
//
// Integer ranges: _mm256_maddubs_epi16 multiplies the unsigned 5-bit codes (≤ 31) by the
// signed activations (|q_a| ≤ 128) and adds pairs: |pair| ≤ 2·31·128 = 7936, far from the
// int16 saturation at 32767. _mm256_madd_epi16 with the 6-bit scale (≤ 63) then gives int32
// pairs ≤ 2·7936·63 ≈ 1e6; the whole block is ≤ 256·31·128·63 ≈ 6.4e7 < 2^31. The mins use the
// Q8_K bsums (|bsum| ≤ 16·128): madd with m (≤ 63) pairs ≤ 2.6e5, block ≤ 1.1e6.
//
// Multi-row: the 5-bit codes of a 64-element chunk and the sub-block scales are unpacked once and
// used for every row; each row has one int32x8 accumulator for the codes and one for the
// mins, so 4 rows take 8 of the 16 ymm registers.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

template <int R>
struct Q5KRows {
  static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const MOETIER_DOT_NS::Rows<BlockQ8_K, R> y(a, stride);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i bit0 = _mm256_set1_epi8(0x01);
    const __m256i bit1 = _mm256_set1_epi8(0x02);
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const MOETIER_DOT_NS::KScaleMin s = MOETIER_DOT_NS::unpack_k_scale_min(x[b].scales);
      __m256i acc[R], min_acc[R];
      MOETIER_DOT_NS::k_start_block<R>(s, y, b, acc, min_acc);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
      // qs[32k .. 32k+31]: low nibbles are sub-block 2k, high nibbles sub-block 2k+1; their
      // fifth bits are bits 2k and 2k+1 of qh[0..31].
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * k));
        // 16-bit shifts are safe: bits 0 and 1 of each byte of h come from bits 2k, 2k+1
        // (≤ 7) of the same byte, and the masked bits move to bit 4 within their byte.
        const __m256i h = _mm256_srli_epi16(qh, 2 * k);
        const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(h, bit0), 4);
        const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(h, bit1), 3);
        const __m256i q_lo = _mm256_or_si256(_mm256_and_si256(q, low_nibble), h_lo);
        const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibble), h_hi);
        MOETIER_DOT_NS::k_add_pair<R>(s, y, b, k, q_lo, q_hi, acc);
      }
      // Reference: sum += d·d_a·scaled − dmin·d_a·mins, per row.
      sum = _mm_add_ps(sum, MOETIER_DOT_NS::k_block_terms<R>(acc, min_acc, y, b, x[b].d, x[b].dmin));
    }
    MOETIER_DOT_NS::store_rows<R>(sum, out);
  }
};

}  // namespace

float MOETIER_DOT_KERNEL(q5_k_q8_k)(int64_t n, const void* w, const void* a) {
  float out;
  Q5KRows<1>::run(n, w, a, 0, &out);
  return out;
}

void MOETIER_DOT_KERNEL_MULTI(q5_k_q8_k)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::dispatch_rows<Q5KRows>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
