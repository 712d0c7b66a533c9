// Q5_K · Q8_K with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// As q4_k_avx512.cpp plus the fifth bit: bit j of qh[i] is the high bit of element i of
// sub-block j. Per super-block the integer sums are exact int32 and the float scaling is
// the scalar reference's expression in block order, so results are bit-identical to
// q5_k_q8_k_scalar (and multi-row to single-row).
//
// Integer ranges: codes ≤ 31 times |q_a| ≤ 128 in _mm512_maddubs_epi16 pairs:
// ≤ 2·31·128 = 7936 < 32767, no saturation. _mm512_dpwssd_epi32 by the 6-bit scale (≤ 63):
// block total ≤ 256·31·128·63 ≈ 6.4e7 < 2^31. Mins as Q4_K (≤ 2.1e6).
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q5K : avx512::KQuantScaleMinFamily {
  using WBlock = BlockQ5_K;

  static Unpacked unpack(const BlockQ5_K& x) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    const __m512i fifth_bit = _mm512_set1_epi8(0x10);
    // qh twice: byte i of either half has the high bits of element i of every sub-block.
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh)));
    Unpacked u;
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
      const __m512i lo = _mm512_and_si512(v, low_nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibble);
      u.q[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
      u.q[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      // Sub-block 2k in bytes 0..31 (bit 2k of qh), 2k + 1 in bytes 32..63 (bit 2k + 1).
      const __m512i bit = avx512::join256(_mm256_set1_epi8(static_cast<char>(1 << (2 * k))),
                                  _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
      const __mmask64 set = _mm512_test_epi8_mask(qh, bit);
      u.q[k] = _mm512_mask_add_epi8(u.q[k], set, u.q[k], fifth_bit);  // code < 16: + 16 sets bit 4
    }
    u.s = avx512::unpack_k_scales(x.scales);
    u.d = avx512::fp16_scalar(x.d);
    u.dmin = avx512::fp16_scalar(x.dmin);
    return u;
  }
};

}  // namespace

float q5_k_q8_k_avx512(int64_t n, const void* w, const void* a) { return avx512::kquant_single<Q5K>(n, w, a); }

void q5_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::kquant_multi<Q5K>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
