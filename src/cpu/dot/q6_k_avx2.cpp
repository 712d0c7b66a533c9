// Q6_K · Q8_K with AVX2. Same arithmetic as q6_k_q8_k_scalar: per super-block
// Σ_j sc_j·((q_w − 32)·q_a)_j is an exact int32 and the float scaling is the reference's
// expression, so the result is bit-identical to the scalar one.
//
// Integer ranges: _mm256_maddubs_epi16 takes the unsigned 6-bit code q (≤ 63) times the
// signed activation (|q_a| ≤ 128), pairs ≤ 2·63·128 = 16128 < 32767 (no saturation); the
// offset is removed as maddubs(q, a) − maddubs(32, a), each pair of the difference being
// (q − 32)·a summed over 2 lanes, |·| ≤ 2·32·128 = 8192. The int8 scale (|sc| ≤ 128) via
// _mm256_madd_epi16 gives int32 pairs ≤ 2.1e6; the block is ≤ 256·32·128·128 ≈ 1.3e8 < 2^31.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace moetier::cpu::dot {

namespace {

// Σ over 32 elements of sc·(q − 32)·a, elements 0..15 scaled by sc_lo, 16..31 by sc_hi.
inline __m256i run32(__m256i q, __m256i act, int8_t sc_lo, int8_t sc_hi) {
  const __m256i offset = _mm256_set1_epi8(32);
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, act), _mm256_maddubs_epi16(offset, act));
  return _mm256_madd_epi16(p, avx2::halves_i16(sc_lo, sc_hi));
}

}  // namespace

MOETIER_NO_FP_CONTRACT float q6_k_q8_k_avx2(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    __m256i acc = _mm256_setzero_si256();
    // Two halves of 128 elements; in each, ql[0..63] and qh[0..31] describe 4 runs of 32.
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      const int8_t* sc = x[b].scales + 8 * half;
      const int8_t* qa = y[b].qs + 128 * half;
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      // 16-bit shifts are safe: every result is masked to the bits of its own byte.
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, two_bits), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two_bits), 4);
      const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two_bits), 4);
      const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two_bits), 4);
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, low_nibble), h0);
      const __m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, low_nibble), h1);
      const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_nibble), h2);
      const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_nibble), h3);
      const auto act = [&](int run) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + 32 * run)); };
      acc = _mm256_add_epi32(acc, run32(q1, act(0), sc[0], sc[1]));
      acc = _mm256_add_epi32(acc, run32(q2, act(1), sc[2], sc[3]));
      acc = _mm256_add_epi32(acc, run32(q3, act(2), sc[4], sc[5]));
      acc = _mm256_add_epi32(acc, run32(q4, act(3), sc[6], sc[7]));
    }
    const int32_t scaled = avx2::hsum_i32(acc);
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled);
  }
  return sum;
}

}  // namespace moetier::cpu::dot
