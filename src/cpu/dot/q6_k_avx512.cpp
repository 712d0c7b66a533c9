// Q6_K · Q8_K with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// Same arithmetic as q6_k_q8_k_scalar: per super-block Σ_j sc_j·((q_w − 32)·q_a)_j is an
// exact int32 and the float scaling is the reference's expression in block order (see
// avx512_util.h), so results are bit-identical to the scalar ones (multi-row to single-row).
//
// The offset is taken out through the activation sums: the 16-element sub-blocks of Q6_K
// are exactly Q8_K's bsums groups, so Σ_j sc_j·((q − 32)·q_a)_j =
// Σ_j sc_j·(q·q_a)_j − Σ_j 32·sc_j·bsums_j, and only the unsigned code q meets vpmaddubsw.
//
// Integer ranges: _mm512_maddubs_epi16 takes the 6-bit code (≤ 63) times |q_a| ≤ 128,
// pairs ≤ 2·63·128 = 16128 < 32767 (no saturation); _mm512_dpwssd_epi32 by the int8 scale
// (|sc| ≤ 128) adds ≤ 2·16128·128 per lane and step; Σ_j sc_j·(q·q_a)_j over the block is
// ≤ 256·63·128·128 ≈ 2.6e8 < 2^31. The correction: −32·sc_j fits int16 (|·| ≤ 4096),
// |bsums_j| ≤ 16·128 = 2048, its total ≤ 16·4096·2048 ≈ 1.3e8; every partial sum of the
// two stays within ±4e8 < 2^31, and the final sum is the exact block value.
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

// kQuadScale[k]: int16 lane l picks element 4k + l / 8 (register k holds the 16-element
// sub-blocks 4k .. 4k + 3 as 32 pair sums, 8 per sub-block).
constexpr avx512::Index16 make_quad_index(int k) {
  avx512::Index16 r{};
  for (int l = 0; l < 32; ++l) r.v[l] = static_cast<int16_t>(4 * k + l / 8);
  return r;
}
constexpr avx512::Index16 kQuadScale[4] = {make_quad_index(0), make_quad_index(1), make_quad_index(2),
                                           make_quad_index(3)};

struct Q6K {
  using WBlock = BlockQ6_K;
  static constexpr bool kHasMins = false;
  struct Unpacked {
    // q[k]: the codes (0..63) of elements 64k .. 64k + 63, matching Q8_K qs[64k ..].
    __m512i q[4];
    __m512i scale[4];  // int16 lanes of register k: sc[4k + l / 8]
    __m512i offset;    // int16 lanes 0..15: −32·sc[l]; lanes 16..31: 0
    float d;
  };

  static Unpacked unpack(const BlockQ6_K& x) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    Unpacked u;
    // Half h: runs 0..3 of 32 elements; ql[64h + i] has run 0 (low nibble) and run 2 (high),
    // ql[64h + 32 + i] runs 1 and 3; bits 2r, 2r + 1 of qh[32h + i] are run r's high bits.
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(x.ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h));
      // Bytes 0..31: qh (runs 0, 2 in bits 0-1, 4-5); 32..63: qh >> 2 (runs 1, 3 there).
      // The 16-bit shift only pulls foreign bits into bits 6-7 of a byte, which are masked.
      const __m512i hh = avx512::join256(qh, _mm256_srli_epi16(qh, 2));
      u.q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, low_nibble),
                                   _mm512_and_si512(_mm512_slli_epi16(hh, 4), bits45));
      u.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low_nibble),
                                       _mm512_and_si512(hh, bits45));
    }
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
    const __m512i sc512 = _mm512_castsi256_si512(sc);
    for (int k = 0; k < 4; ++k) u.scale[k] = _mm512_permutexvar_epi16(avx512::load_index(kQuadScale[k]), sc512);
    u.offset = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc, _mm256_set1_epi16(-32)));
    u.d = avx512::fp16_scalar(x.d);
    return u;
  }

  static __m512i lanes(const Unpacked& u, const BlockQ8_K& y) {
    // The upper 16 lanes of u.offset are 0, so the bsums register's upper half is unused.
    __m512i acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(avx512::load_bsums(y)), u.offset);
    for (int k = 0; k < 4; ++k) {
      const __m512i act = _mm512_loadu_si512(y.qs + 64 * k);
      acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u.q[k], act), u.scale[k]);
    }
    return acc;
  }
};

}  // namespace

float q6_k_q8_k_avx512(int64_t n, const void* w, const void* a) { return avx512::kquant_single<Q6K>(n, w, a); }

void q6_k_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::kquant_multi<Q6K>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
