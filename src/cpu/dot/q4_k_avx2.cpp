// Q4_K · Q8_K with AVX2. Same arithmetic as q4_k_q8_k_scalar: per super-block the
// integer sums Σ_j sc_j·(q_w·q_a)_j and Σ_j m_j·(Σ q_a)_j are exact int32, and the float
// scaling is the reference's expression, so the result is bit-identical to the scalar one.
//
// Integer ranges: _mm256_maddubs_epi16 multiplies the unsigned 4-bit codes (≤ 15) by the
// signed activations (|q_a| ≤ 128) and adds pairs: |pair| ≤ 2·15·128 = 3840, far from the
// int16 saturation at 32767. _mm256_madd_epi16 with the 6-bit scale (≤ 63) then gives int32
// pairs ≤ 2·3840·63; the whole block is ≤ 256·15·128·63 ≈ 3.1e7 < 2^31.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/k_scale_min.h"

namespace moetier::cpu::dot {

MOETIER_NO_FP_CONTRACT float q4_k_q8_k_avx2(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int16_t sc[8];
    int32_t mins = 0;
    for (int j = 0; j < 8; ++j) {
      const auto [s, m] = types::kquant::unpack_scale_min(x[b].scales, j);
      sc[j] = static_cast<int16_t>(s);
      mins += m * (int32_t{y[b].bsums[2 * j]} + y[b].bsums[2 * j + 1]);
    }
    __m256i acc = _mm256_setzero_si256();
    // qs[32k .. 32k+31]: low nibbles are sub-block 2k, high nibbles sub-block 2k+1.
    for (int k = 0; k < 4; ++k) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * k));
      const __m256i q_lo = _mm256_and_si256(q, low_nibble);
      const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibble);
      const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * k));
      const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * k + 32));
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, a_lo), _mm256_set1_epi16(sc[2 * k]));
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, a_hi), _mm256_set1_epi16(sc[2 * k + 1]));
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(p_lo, p_hi));
    }
    const int32_t scaled = avx2::hsum_i32(acc);
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled) -
           fp16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(mins);
  }
  return sum;
}

}  // namespace moetier::cpu::dot
