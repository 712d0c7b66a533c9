// Q6_K · Q8_K with AVX2, one activation row (q6_k_q8_k_avx2) or up to kMaxDotRows of them
// (q6_k_q8_k_avx2_multi). Same arithmetic as q6_k_q8_k_scalar: per super-block and row
// Σ_j sc_j·((q_w − 32)·q_a)_j is an exact int32 and the float scaling is the reference's
// expression (lane r of a float vector for row r, no contraction), so every row is
// bit-identical to the scalar kernel.
//
// The −32 offset is applied through the Q8_K bsums, whose 16-element groups are exactly
// Q6_K's sub-blocks: Σ_j sc_j·((q − 32)·q_a)_j = Σ_j sc_j·(q·q_a)_j − 32·Σ_j sc_j·bsums_j.
// (Q8_K's contract, types/q8_k.cpp, is that bsums_j = Σ of group j's codes.)
//
// Integer ranges: _mm256_maddubs_epi16 takes the unsigned 6-bit code q (≤ 63) times the
// signed activation (|q_a| ≤ 128), pairs ≤ 2·63·128 = 16128 < 32767 (no saturation). The
// int8 scale (|sc| ≤ 128) via _mm256_madd_epi16 gives int32 pairs ≤ 4.2e6; the code part of
// a block is ≤ 256·63·128·128 ≈ 2.6e8, the offset part (|bsum| ≤ 16·128) ≤ 32·16·128·2048
// ≈ 1.3e8, every partial sum ≤ 4e8 < 2^31.
//
// Multi-row: the codes of each 32-element run and its scales are unpacked once and used
// for every row; each row keeps one int32x8 accumulator.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

// Byte-shuffle controls that turn a ymm holding 8 int16 scales in both 128-bit lanes into
// the scales of run k (32 elements): low lane all sc[2k], high lane all sc[2k+1].
inline __m256i run_scale_control(int k) {
  const char lo0 = static_cast<char>(4 * k), lo1 = static_cast<char>(4 * k + 1);
  const char hi0 = static_cast<char>(4 * k + 2), hi1 = static_cast<char>(4 * k + 3);
  return _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1,  //
                          hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1);
}

template <int R>
struct Q6KRows {
  static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const MOETIER_DOT_NS::Rows<BlockQ8_K, R> y(a, stride);
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i two_bits = _mm256_set1_epi8(0x03);
    const __m256i ctrl[4] = {run_scale_control(0), run_scale_control(1), run_scale_control(2),
                             run_scale_control(3)};
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      // 16 int16 scales; acc starts at −32·Σ_j sc_j·bsums_j.
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
      __m256i acc[R];
      for (int r = 0; r < R; ++r) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.p[r][b].bsums));
        acc[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
      }
      // This block's scales, half h's 8 in both 128-bit lanes of sc_half[h].
      const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                  _mm256_permute2x128_si256(sc16, sc16, 0x11)};
      // 8 runs of 32: run 4·half + k covers elements 128·half + 32k .. +31; its low 4 bits
      // are in ql[64·half + 32·(k % 2) + i] (low nibble for k < 2, high for k ≥ 2) and its
      // high 2 bits are bits 2k, 2k+1 of qh[32·half + i].
      #pragma GCC unroll 8  // rolled, the 4-row kernel ran 18% slower
      for (int run = 0; run < 8; ++run) {
        const int half = run / 4, k = run % 4;
        const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].ql + 64 * half + 32 * (k % 2)));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * half));
        // 16-bit shifts are safe: every result is masked to the bits of its own byte.
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(l, _mm_cvtsi32_si128(4 * (k / 2))), low_nibble);
        const __m256i high = _mm256_slli_epi16(
            _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k)), two_bits), 4);
        const __m256i q = _mm256_or_si256(low, high);
        const __m256i sc = _mm256_shuffle_epi8(sc_half[half], ctrl[k]);
        for (int r = 0; r < R; ++r) {
          const int8_t* qa = y.p[r][b].qs + 32 * run;
          const __m256i act = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa));
          acc[r] = MOETIER_DOT_NS::madd_acc(acc[r], _mm256_maddubs_epi16(q, act), sc);
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

float MOETIER_DOT_KERNEL(q6_k_q8_k)(int64_t n, const void* w, const void* a) {
  float out;
  Q6KRows<1>::run(n, w, a, 0, &out);
  return out;
}

void MOETIER_DOT_KERNEL_MULTI(q6_k_q8_k)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::dispatch_rows<Q6KRows>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
