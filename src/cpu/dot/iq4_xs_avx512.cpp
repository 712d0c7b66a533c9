// IQ4_XS · Q8_K with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// Same arithmetic as iq4_xs_q8_k_scalar: per super-block Σ_j (ls_j − 32)·S_j, with
// S_j = Σ_{i∈j} grid[q_w,i]·q_a,i, is an exact int32 and the float scaling is the
// reference's expression in block order (see avx512_util.h), so results are bit-identical to
// the scalar ones (multi-row to single-row).
//
// The grid values are signed (−127 .. 113) and VPDPBUSD needs an unsigned operand, so the
// grid is looked up as grid + 128 (1 .. 241) and the offset removed with the Q8_K bsums:
// Σ_j (ls_j − 32)·S_j = Σ_j (ls_j − 32)·Σ (grid + 128)·q_a − 128·Σ_j (ls_j − 32)·Σ_{i∈j} q_a.
// VPDPBUSD does not saturate, so every product is exact for any int8 activation.
//
// Layout: qs[64h .. 64h+63] hold sub-blocks 4h .. 4h+3, 16 bytes each (low nibbles elements
// 0..15, high nibbles 16..31), so the low nibbles of one 64-byte load have sub-block 4h+i in
// 128-bit lane i, and so do the high nibbles. Each row's activations are brought into that
// order with two VSHUFI64X2 per 128 elements (shared nothing, but cheaper than permuting
// the weights and widening them to int16 as before). Lane i of the dot then sums to
// S_4h+i (+ offset), and one VPMULLD by ls − 32 broadcast per lane scales it.
//
// Integer ranges: a lane's offset sum is ≤ 8·241·128 ≈ 2.5e5, times |ls − 32| ≤ 32 ≈ 7.9e6;
// Σ_j (ls_j − 32)·Σ (grid + 128)·q_a ≤ 8·32·32·241·128 ≈ 2.5e8 and the bsum term
// 128·Σ_j |ls_j − 32|·|Σ q_a| ≤ 128·8·32·32·128 ≈ 1.3e8, both < 2^31, and the difference is
// the exact block total (≤ 256·127·32·128 ≈ 1.3e8).
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct IQ4XS {
  using WBlock = BlockIQ4_XS;
  static constexpr bool kHasMins = false;
  struct Unpacked {
    __m512i grid_lo[2], grid_hi[2];  // grid + 128 of the low / high nibbles of qs[64h ..]
    __m512i scale[2];                // ls_4h+i − 32 in every int32 of lane i
    __m256i scale_pairs;             // int16 ls_j − 32 twice (j = 0..7), to madd with bsums
    float d;
  };

  static Unpacked unpack(const BlockIQ4_XS& x) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0F);
    const __m512i grid = _mm512_add_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues))),
        _mm512_set1_epi8(static_cast<char>(0x80)));
    // 6-bit scales: low 4 bits from the nibbles of scales_l (sub-block 2i: low nibble of
    // byte i, 2i + 1: high nibble), high 2 bits from bits 2j, 2j + 1 of scales_h.
    uint32_t sl;
    std::memcpy(&sl, x.scales_l, sizeof(sl));
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(sl)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0x0F));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(x.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(0x03));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    const __m512i ls512 = _mm512_castsi256_si512(ls);

    Unpacked u;
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
      u.grid_lo[h] = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, low_nibble));
      u.grid_hi[h] = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibble));
      const int j = 4 * h;
      u.scale[h] = _mm512_permutexvar_epi32(
          _mm512_setr_epi32(j, j, j, j, j + 1, j + 1, j + 1, j + 1, j + 2, j + 2, j + 2, j + 2, j + 3, j + 3, j + 3, j + 3),
          ls512);
    }
    // int16 lanes 2j, 2j+1 = ls_j − 32 (the bsums are per 16 elements: two per sub-block).
    u.scale_pairs = _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(ls, 16));
    u.d = avx512::fp16_scalar(x.d);
    return u;
  }

  static __m512i lanes(const Unpacked& u, const BlockQ8_K& y) {
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // Natural order: z0 = sub-blocks 4h, 4h+1, z1 = 4h+2, 4h+3, each as [0..15 | 16..31].
      const __m512i z0 = _mm512_loadu_si512(y.qs + 128 * h);
      const __m512i z1 = _mm512_loadu_si512(y.qs + 128 * h + 64);
      // Lane i = elements 0..15 (a_lo) or 16..31 (a_hi) of sub-block 4h+i.
      const __m512i a_lo = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i a_hi = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
      const __m512i t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u.grid_lo[h], a_lo), u.grid_hi[h], a_hi);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(t, u.scale[h]));
    }
    // − 128·Σ_j (ls_j − 32)·Σ_{i∈j} q_a.
    const __m256i offset = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), u.scale_pairs), 7);
    return _mm512_sub_epi32(acc, _mm512_zextsi256_si512(offset));
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
