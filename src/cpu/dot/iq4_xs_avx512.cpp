// IQ4_XS · Q8_K with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// Same arithmetic as iq4_xs_q8_k_scalar: per super-block Σ_j (ls_j − 32)·(grid[q_w]·q_a)_j
// is an exact int32 and the float scaling is the reference's expression in block order
// (see avx512_util.h), so results are bit-identical to the scalar ones (multi-row to
// single-row).
//
// The grid values are signed (−127 .. 113), so vpmaddubsw's unsigned operand cannot hold
// them, and grid + 128 overflows its int16 pairs. Instead each weight block is expanded
// once, shared by all rows, to int16 products grid[q]·(ls − 32), and each row's
// activations are sign-extended to int16 and meet them in _mm512_dpwssd_epi32 (exact for
// every int8 activation, −128 included).
//
// Integer ranges: |grid·(ls − 32)| ≤ 127·32 = 4064 fits int16; each dpwssd step adds
// ≤ 2·4064·128 ≈ 1.04e6 to a lane; the block total is ≤ 256·127·32·128 ≈ 1.3e8 < 2^31.
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct IQ4XS {
  using WBlock = BlockIQ4_XS;
  static constexpr bool kHasMins = false;
  struct Unpacked {
    __m512i w[8];  // w[j]: int16 grid[q]·(ls_j − 32) of sub-block j's 32 elements, in order
    float d;
  };

  static Unpacked unpack(const BlockIQ4_XS& x) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
    // 6-bit scales: low 4 bits from the nibbles of scales_l (sub-block 2i: low nibble of
    // byte i, 2i + 1: high nibble), high 2 bits from bits 2j, 2j + 1 of scales_h.
    uint32_t sl;
    std::memcpy(&sl, x.scales_l, sizeof(sl));
    const __m128i slv = _mm_cvtsi32_si128(static_cast<int>(sl));
    const __m128i nib = _mm_set1_epi8(0x0F);
    const __m128i low4 = _mm_cvtepu8_epi16(
        _mm_unpacklo_epi8(_mm_and_si128(slv, nib), _mm_and_si128(_mm_srli_epi16(slv, 4), nib)));
    const __m128i high2 = _mm_and_si128(
        _mm_srlv_epi16(_mm_set1_epi16(static_cast<short>(x.scales_h)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm_set1_epi16(3));
    const __m128i ls = _mm_sub_epi16(_mm_or_si128(low4, _mm_slli_epi16(high2, 4)), _mm_set1_epi16(32));
    const __m512i ls512 = _mm512_castsi128_si512(ls);

    Unpacked u;
    for (int h = 0; h < 2; ++h) {
      // 128-bit lane i of v: qs of sub-block 4h + i (low nibbles elements 0..15, high 16..31).
      const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
      const __m512i g_lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, low_nibble));
      const __m512i g_hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibble));
      // Sub-blocks 4h, 4h + 1 and 4h + 2, 4h + 3 with their elements in order.
      const __m512i p01 = _mm512_permutex2var_epi64(g_lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), g_hi);
      const __m512i p23 = _mm512_permutex2var_epi64(g_lo, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), g_hi);
      const __m256i g[4] = {_mm512_castsi512_si256(p01), _mm512_extracti64x4_epi64(p01, 1),
                            _mm512_castsi512_si256(p23), _mm512_extracti64x4_epi64(p23, 1)};
      for (int i = 0; i < 4; ++i) {
        const int j = 4 * h + i;
        const __m512i scale = _mm512_permutexvar_epi16(_mm512_set1_epi16(static_cast<short>(j)), ls512);
        u.w[j] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(g[i]), scale);
      }
    }
    u.d = avx512::fp16_scalar(x.d);
    return u;
  }

  static __m512i lanes(const Unpacked& u, const BlockQ8_K& y) {
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const __m512i act = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * j)));
      acc = _mm512_dpwssd_epi32(acc, act, u.w[j]);
    }
    return acc;
  }
};

}  // namespace

float iq4_xs_q8_k_avx512(int64_t n, const void* w, const void* a) {
  return avx512::kquant_single<IQ4XS>(n, w, a);
}

void iq4_xs_q8_k_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::kquant_multi<IQ4XS>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
