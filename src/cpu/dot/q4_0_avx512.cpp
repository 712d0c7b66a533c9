// Q4_0 · Q8_0 with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// The block's codes are unpacked to signed bytes q − 8 ∈ [−8, 7] (qs[j]: element j in the
// low nibble, j + 16 in the high one) and then go through the Q8_0 driver: an exact int32
// block sum (vpdpbusd; ranges in avx512_util.h, here ≤ 32·8·127) and q4_0_q8_0_scalar's
// float expression per block in block order, so results are bit-identical to the scalar
// ones (and multi-row to single-row).
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q4_0 {
  using WBlock = BlockQ4_0;
  static __m256i codes(const BlockQ4_0& x) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
    const __m128i low_nibble = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(q, low_nibble);                     // elements 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low_nibble);  // elements 16..31
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
};

}  // namespace

float q4_0_q8_0_avx512(int64_t n, const void* w, const void* a) {
  return avx512::q8_0_family_single<Q4_0>(n, w, a);
}

void q4_0_q8_0_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::q8_0_family_multi<Q4_0>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
