// Q4_0 · Q8_0 with AVX2, one activation row (q4_0_q8_0_avx2) or up to kMaxDotRows of them
// (q4_0_q8_0_avx2_multi). Per 32-element block the integer sum Σ (q_w − 8)·q_a is exact
// (int32 lanes, then an exact horizontal add), and the float scaling and accumulation are
// the reference's, in the same order, so every row is bit-identical to q4_0_q8_0_scalar.
//
// The 16 code bytes become 32 signed weights w = q − 8 in [−8, 7] (low nibbles are elements
// 0..15, high nibbles 16..31). _mm256_maddubs_epi16 needs one unsigned operand: |w| is
// paired with q_a carrying w's sign (_mm256_sign_epi8), exact because activations are in
// [−127, 127] (the Q8_0 quantizer never writes −128). Pairs ≤ 2·8·127 = 2032 < 32767; a
// block's total ≤ 32·8·127 = 32512.
//
// Multi-row: the weights and |w| are formed once per block for all rows; the rows' block sums come out of
// one horizontal-add tree and are scaled in the lanes of one float vector (lane r = row r,
// the reference's expression, no contraction).
#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

// 8 int32 lanes whose total is Σ_j w[j]·q_a[j] over one block; abs_w = |w|.
inline __m256i block_lanes(__m256i qw, __m256i abs_w, const int8_t* qa_ptr) {
  const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa_ptr));
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(qa, qw));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// The 32 weights q − 8 of a block, in element order.
inline __m256i block_weights(const BlockQ4_0& x) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
  const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  return _mm256_sub_epi8(codes, _mm256_set1_epi8(8));
}

inline __m256i block_lanes(const BlockQ4_0& x, const BlockQ8_0& y) {
  const __m256i qw = block_weights(x);
  return block_lanes(qw, _mm256_sign_epi8(qw, qw), y.qs);
}

template <int R>
struct Q40Rows {
  MOETIER_NO_FP_CONTRACT static void run(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const avx2::Rows<BlockQ8_0, R> y(a, stride);
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
      const __m256i qw = block_weights(x[b]);
      const __m256i abs_w = _mm256_sign_epi8(qw, qw);
      __m256i lanes[R];
      for (int r = 0; r < R; ++r) lanes[r] = block_lanes(qw, abs_w, y.p[r][b].qs);
      const __m128i isum = avx2::hsum_rows<R>(lanes);
      // Reference: sum += isum · (d_w · d_a), per row.
      const __m128 d = _mm_mul_ps(_mm_set1_ps(avx2::f16(x[b].d)), avx2::q8_0_scales<R>(y, b));
      sum = _mm_add_ps(sum, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
    }
    avx2::store_rows<R>(sum, out);
  }
};

}  // namespace

MOETIER_NO_FP_CONTRACT float q4_0_q8_0_avx2(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t n_blocks = n / kQK4_0;
  float sum = 0;
  int64_t b = 0;
  // Four blocks at a time: one horizontal-add tree turns their 4×8 lanes into the 4 exact
  // block sums, then the float scaling runs per block in order, as in the reference.
  for (; b + 4 <= n_blocks; b += 4) {
    alignas(16) int32_t isum[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(isum),
                    avx2::hsum4_i32(block_lanes(x[b], y[b]), block_lanes(x[b + 1], y[b + 1]),
                                    block_lanes(x[b + 2], y[b + 2]), block_lanes(x[b + 3], y[b + 3])));
    for (int k = 0; k < 4; ++k) {
      sum += static_cast<float>(isum[k]) * (avx2::f16(x[b + k].d) * avx2::f16(y[b + k].d));
    }
  }
  for (; b < n_blocks; ++b) {
    const int32_t isum = avx2::hsum_i32(block_lanes(x[b], y[b]));
    sum += static_cast<float>(isum) * (avx2::f16(x[b].d) * avx2::f16(y[b].d));
  }
  return sum;
}

void q4_0_q8_0_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  if (n_act == 1) {
    out[0] = q4_0_q8_0_avx2(n, w, a);
    return;
  }
  avx2::dispatch_rows<Q40Rows>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
