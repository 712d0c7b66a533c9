// IQ4_XS · Q8_K with AVX2, one activation row (iq4_xs_q8_k_avx2) or up to kMaxDotRows of
// them (iq4_xs_q8_k_avx2_multi); compiled again with AVX-VNNI (iq4_xs_avxvnni.cpp). Same
// arithmetic as iq4_xs_q8_k_scalar: per super-block and row Σ_j (ls_j − 32)·S_j, with
// S_j = Σ_{i∈j} grid[q_w,i]·q_a,i, is an exact int32 and the float scaling is the
// reference's expression (lane r of a float vector for row r, no contraction), so every row
// is bit-identical to the scalar kernel.
//
// Layout: qs[32p .. 32p+31] hold sub-blocks 2p (bytes 0..15) and 2p+1 (bytes 16..31); in a
// sub-block's 16 bytes the low nibbles are elements 0..15, the high nibbles 16..31. So the
// low nibbles of one 32-byte load are [2p: 0..15 | 2p+1: 0..15] and the high nibbles
// [2p: 16..31 | 2p+1: 16..31]. Rather than permuting the weights into element order (two
// lane-crossing permutes per 64 elements), each row's activations are loaded in the
// weights' order as two 16-byte halves; every 128-bit lane then holds one sub-block, and
// the sub-block sums S_j stay unscaled until the end of the super-block: two rounds of
// horizontal adds give [S0 S2 S4 S6 | S1 S3 S5 S7], one VPMULLD applies the scales (read
// in that order) and one horizontal sum gives the block total. This does a third fewer
// vector operations per element than scaling each sub-block with its own VPMADDWD.
//
// Products, AVX-VNNI: VPDPBUSD needs an unsigned operand, so the grid is looked up as
// grid + 128 (1 .. 241, u8) and S_j = Σ (grid + 128)·q_a − 128·Σ q_a, with Σ q_a of the
// sub-block from the Q8_K bsums. VPDPBUSD does not saturate: a lane's four products are
// ≤ 4·241·128 and the sub-block sum ≤ 32·241·128 ≈ 9.9e5.
// Products, AVX2: VPMADDUBSW would saturate on grid + 128 (2·241·127 > 32767), so it gets
// |g| (≤ 127) and the activation carrying g's sign (_mm256_sign_epi8(q_a, g));
// |g|·sign(g)·q_a = g·q_a exactly because activations are in [−127, 127] (the Q8_K
// quantizer never writes −128, see types/q8_k.cpp) and g is never 0. Pairs ≤ 2·127·127 =
// 32258 < 32767; VPMADDWD by 1 widens them to int32.
// Totals: |S_j| ≤ 32·127·127 = 516,128, |(ls − 32)·S_j| ≤ 32·S_j ≈ 1.65e7 and the block
// total ≤ 8× that ≈ 1.3e8 < 2^31.
#include <cstring>

#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

// ls_j − 32 as int32 lanes in the order the sums come out: [0 2 4 6 | 1 3 5 7]. ls_j's low
// 4 bits are nibble j of scales_l (4 bytes, low nibble first), its high 2 bits are bits
// 2j, 2j+1 of scales_h.
inline __m256i sub_block_scales_even_odd(const BlockIQ4_XS& x) {
  uint32_t scales_l;
  std::memcpy(&scales_l, x.scales_l, sizeof(scales_l));
  const __m256i lo = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(scales_l)), _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28)),
      _mm256_set1_epi32(0x0F));
  const __m256i hi = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(x.scales_h), _mm256_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14)),
      _mm256_set1_epi32(0x03));
  return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

// One row's sums of 64 elements (sub-blocks 2p, 2p+1): int32 lanes whose low 128 bits add
// up to S_2p and high 128 bits to S_2p+1 (AVX-VNNI: with the +128 offset still in them).
// g_lo / g_hi: looked-up grid values of the low / high nibbles; qa: the row's 64 activations.
inline __m256i pair_sums(__m256i g_lo, __m256i g_hi, const int8_t* qa) {
  // Activations in the weights' order: [2p: 0..15 | 2p+1: 0..15] and [2p: 16..31 | 2p+1: 16..31].
  const __m256i a_lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(qa + 32), reinterpret_cast<const __m128i*>(qa));
  const __m256i a_hi =
      _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(qa + 48), reinterpret_cast<const __m128i*>(qa + 16));
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), g_lo, a_lo), g_hi, a_hi);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i p_lo = _mm256_maddubs_epi16(_mm256_sign_epi8(g_lo, g_lo), _mm256_sign_epi8(a_lo, g_lo));
  const __m256i p_hi = _mm256_maddubs_epi16(_mm256_sign_epi8(g_hi, g_hi), _mm256_sign_epi8(a_hi, g_hi));
  return _mm256_add_epi32(_mm256_madd_epi16(p_lo, ones), _mm256_madd_epi16(p_hi, ones));
#endif
}

template <int R>
struct IQ4XSRows {
  static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const MOETIER_DOT_NS::Rows<BlockQ8_K, R> y(a, stride);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
#if defined(__AVXVNNI__)
    const __m256i grid = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues))),
        _mm256_set1_epi8(static_cast<char>(0x80)));
#else
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
#endif
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      // half[r][h]: hadd of the pair sums of p = 2h and 2h+1:
      // [S_4h S_4h S_4h+2 S_4h+2 | S_4h+1 S_4h+1 S_4h+3 S_4h+3] (each entry a partial sum).
      __m256i half[R][2];
      for (int h = 0; h < 2; ++h) {
        __m256i g_lo[2], g_hi[2];
        for (int k = 0; k < 2; ++k) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * h + 32 * k));
          g_lo[k] = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, low_nibble));
          g_hi[k] = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibble));
        }
        for (int r = 0; r < R; ++r) {
          const int8_t* qa = y.p[r][b].qs + 128 * h;
          half[r][h] = _mm256_hadd_epi32(pair_sums(g_lo[0], g_hi[0], qa), pair_sums(g_lo[1], g_hi[1], qa + 64));
        }
      }
      const __m256i scales = sub_block_scales_even_odd(x[b]);
      __m256i scaled[R];
      for (int r = 0; r < R; ++r) {
        __m256i sums = _mm256_hadd_epi32(half[r][0], half[r][1]);  // [S0 S2 S4 S6 | S1 S3 S5 S7]
#if defined(__AVXVNNI__)
        // Remove the +128 offset: 128·Σ q_a per sub-block (bsums are per 16 elements).
        const __m256i act_sums = _mm256_madd_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.p[r][b].bsums)), _mm256_set1_epi16(1));
        sums = _mm256_sub_epi32(
            sums, _mm256_slli_epi32(_mm256_permutevar8x32_epi32(act_sums, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)), 7));
#endif
        scaled[r] = _mm256_mullo_epi32(sums, scales);
      }
      const __m128i totals = MOETIER_DOT_NS::hsum_rows<R>(scaled);
      // Reference: sum += d·d_a·total, per row.
      const __m128 d_a = MOETIER_DOT_NS::q8k_scales<R>(y, b);
      sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(MOETIER_DOT_NS::f16(x[b].d)), d_a), _mm_cvtepi32_ps(totals)));
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
