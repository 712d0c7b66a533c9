// IQ4_XS · Q8_K with AVX2, one activation row (iq4_xs_q8_k_avx2) or up to kMaxDotRows of
// them (iq4_xs_q8_k_avx2_multi). Same arithmetic as iq4_xs_q8_k_scalar: per super-block
// and row Σ_j (ls_j − 32)·(grid[q_w]·q_a)_j is an exact int32 and the float scaling is the
// reference's expression (lane r of a float vector for row r, no contraction), so every
// row is bit-identical to the scalar kernel.
//
// The 4-bit indices are looked up in the signed 16-value grid with _mm256_shuffle_epi8.
// _mm256_maddubs_epi16 needs one unsigned operand, so it gets |g| (≤ 127) and the
// activation carrying g's sign (_mm256_sign_epi8(q_a, g)); |g|·sign(g)·q_a = g·q_a is exact
// because activations are in [−127, 127] (the Q8_K quantizer never writes −128, see
// types/q8_k.cpp) and g is never 0. Pairs ≤ 2·127·127 = 32258 < 32767: no saturation.
// _mm256_madd_epi16 with ls − 32 (|·| ≤ 32) gives int32 pairs ≤ 2.1e6; the whole block is
// ≤ 256·127·127·32 ≈ 1.3e8 < 2^31.
//
// Multi-row: the grid values (and their magnitudes) of a 64-element chunk and the 8
// sub-block scales are computed once and used for every row; each row keeps one int32x8
// accumulator.
#include <cstring>

#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

// i16_pairs of ls_j − 32 (j = 0..7): ls_j's low 4 bits are nibble j of scales_l (4 bytes,
// low nibble first), its high 2 bits are bits 2j, 2j+1 of scales_h.
inline __m256i sub_block_scales(const BlockIQ4_XS& x) {
  uint32_t scales_l;
  std::memcpy(&scales_l, x.scales_l, sizeof(scales_l));
  const __m256i lo = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(scales_l)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
      _mm256_set1_epi32(0x0F));
  const __m256i hi = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(x.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(0x03));
  const __m256i ls = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 4));
  return MOETIER_DOT_NS::i16_pairs(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
}

template <int R>
struct IQ4XSRows {
  MOETIER_NO_FP_CONTRACT static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const MOETIER_DOT_NS::Rows<BlockQ8_K, R> y(a, stride);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const __m256i scales = sub_block_scales(x[b]);
      __m256i acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
      // qs[32p .. 32p+31] hold sub-blocks 2p and 2p+1, 16 bytes each: in sub-block j's
      // bytes, low nibbles are elements 0..15 and high nibbles elements 16..31.
      for (int p = 0; p < 4; ++p) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * p));
        const __m256i lo = _mm256_and_si256(q, low_nibble);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibble);
        // Indices in element order: sub-block 2p = [lo | hi] of the low lanes, 2p+1 of the high.
        const __m256i g0 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x20));
        const __m256i g1 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x31));
        const __m256i m0 = _mm256_sign_epi8(g0, g0);
        const __m256i m1 = _mm256_sign_epi8(g1, g1);
        const __m256i sc0 = MOETIER_DOT_NS::splat_i16(scales, 2 * p);
        const __m256i sc1 = MOETIER_DOT_NS::splat_i16(scales, 2 * p + 1);
        for (int r = 0; r < R; ++r) {
          const int8_t* qa = y.p[r][b].qs + 64 * p;
          const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa));
          const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + 32));
          acc[r] = MOETIER_DOT_NS::madd_acc(acc[r], _mm256_maddubs_epi16(m0, _mm256_sign_epi8(a0, g0)), sc0);
          acc[r] = MOETIER_DOT_NS::madd_acc(acc[r], _mm256_maddubs_epi16(m1, _mm256_sign_epi8(a1, g1)), sc1);
        }
      }
      const __m128i scaled = MOETIER_DOT_NS::hsum_rows<R>(acc);
      // Reference: sum += d·d_a·scaled, per row.
      const __m128 d_a = MOETIER_DOT_NS::q8k_scales<R>(y, b);
      sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(MOETIER_DOT_NS::f16(x[b].d)), d_a), _mm_cvtepi32_ps(scaled)));
    }
    MOETIER_DOT_NS::store_rows<R>(sum, out);
  }
};

}  // namespace

float MOETIER_DOT_KERNEL(iq4_xs_q8_k)(int64_t n, const void* w, const void* a) {
  float out;
  IQ4XSRows<1>::run(n, w, a, 0, &out);
  return out;
}

void MOETIER_DOT_KERNEL_MULTI(iq4_xs_q8_k)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::dispatch_rows<IQ4XSRows>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
