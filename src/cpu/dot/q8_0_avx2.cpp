// Q8_0 · Q8_0 with AVX2. Per 32-element block the integer sum is exact (int32 lanes, then
// an exact horizontal add), and the float scaling and accumulation are the reference's, in
// the same order, so the result is bit-identical to q8_0_q8_0_scalar. (Accumulating in 8
// float lanes would be faster but changes the rounding; with that variant in the tree the
// tiny models' end-to-end logit test against llama.cpp went past its tolerance.)
//
// _mm256_maddubs_epi16 needs one unsigned operand: |q_w| is paired with q_a carrying q_w's
// sign (_mm256_sign_epi8), which is exact because activations are in [−127, 127] (the Q8_0
// quantizer never writes −128). Pairs are ≤ 2·128·127 = 32512 < 32767: no saturation.
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace moetier::cpu::dot {

namespace {

// 8 int32 lanes whose total is Σ_j q_w[j]·q_a[j] over one block.
inline __m256i block_lanes(const BlockQ8_0& x, const BlockQ8_0& y) {
  const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qa, qw));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

}  // namespace

MOETIER_NO_FP_CONTRACT float q8_0_q8_0_avx2(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t n_blocks = n / kQK8_0;
  float sum = 0;
  int64_t b = 0;
  // Four blocks at a time: three horizontal adds turn their 4×8 lanes into the 4 exact
  // block sums (lane k of each 128-bit half holds half of block k's sum), then the float
  // scaling runs per block in order, as in the reference.
  for (; b + 4 <= n_blocks; b += 4) {
    const __m256i h01 = _mm256_hadd_epi32(block_lanes(x[b], y[b]), block_lanes(x[b + 1], y[b + 1]));
    const __m256i h23 = _mm256_hadd_epi32(block_lanes(x[b + 2], y[b + 2]), block_lanes(x[b + 3], y[b + 3]));
    const __m256i h = _mm256_hadd_epi32(h01, h23);
    alignas(16) int32_t isum[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(isum),
                    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    for (int k = 0; k < 4; ++k) {
      sum += static_cast<float>(isum[k]) * (fp16_to_f32(x[b + k].d) * fp16_to_f32(y[b + k].d));
    }
  }
  for (; b < n_blocks; ++b) {
    const int32_t isum = avx2::hsum_i32(block_lanes(x[b], y[b]));
    sum += static_cast<float>(isum) * (fp16_to_f32(x[b].d) * fp16_to_f32(y[b].d));
  }
  return sum;
}

}  // namespace moetier::cpu::dot
