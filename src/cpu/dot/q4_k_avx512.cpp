// Q4_K · Q8_K with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// Same arithmetic as q4_k_q8_k_scalar: per super-block the integer sums
// Σ_j sc_j·(q_w·q_a)_j and Σ_j m_j·(Σ q_a)_j are exact int32 and the float scaling is the
// reference's expression, in block order (see avx512_util.h), so every result is
// bit-identical to the scalar one, and the multi-row results to the single-row ones.
//
// Layout: qs[32k .. 32k+31] hold sub-block 2k in the low nibbles and 2k+1 in the high
// ones, and Q8_K qs[64k .. 64k+63] are exactly those two sub-blocks' activations, so one
// register of [low | high] nibbles meets one 64-byte activation load.
//
// Integer ranges: _mm512_maddubs_epi16 multiplies the unsigned 4-bit codes (≤ 15) by the
// signed activations (|q_a| ≤ 128) and adds pairs: |pair| ≤ 2·15·128 = 3840 < 32767, no
// saturation. _mm512_dpwssd_epi32 multiplies the pairs by the 6-bit scale (≤ 63) and adds
// two of them per int32 lane: each lane grows by ≤ 2·3840·63 per step; the block total is
// ≤ 256·15·128·63 ≈ 3.1e7 < 2^31. Mins: bsums (|Σ of 16| ≤ 2048) times m ≤ 63 through
// _mm256_madd_epi16, total ≤ 8·2·2048·63 ≈ 2.1e6.
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q4K : avx512::KQuantScaleMinFamily {
  using WBlock = BlockQ4_K;

  static Unpacked unpack(const BlockQ4_K& x) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    Unpacked u;
    for (int h = 0; h < 2; ++h) {
      // Groups 2h and 2h + 1 (128-bit lanes 0,1 and 2,3).
      const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
      const __m512i lo = _mm512_and_si512(v, low_nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibble);
      u.q[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
      u.q[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
    }
    u.s = avx512::unpack_k_scales(x.scales);
    u.d = avx512::fp16_scalar(x.d);
    u.dmin = avx512::fp16_scalar(x.dmin);
    return u;
  }
};

}  // namespace

float q4_k_q8_k_avx512(int64_t n, const void* w, const void* a) { return avx512::kquant_single<Q4K>(n, w, a); }

void q4_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::kquant_multi<Q4K>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
