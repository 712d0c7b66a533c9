// Q4_0 · Q8_0 with AVX2, one activation row or up to kMaxDotRows of them; the arithmetic
// and its exactness argument are in q8_0_family_avx2.h. The 16 code bytes become 32 signed
// weights w = q − 8 in [−8, 7] (low nibbles are elements 0..15, high nibbles 16..31).
#include "cpu/dot.h"
#include "cpu/dot/q8_0_family_avx2.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q4_0Weights {
  using WBlock = BlockQ4_0;
  static __m256i weights(const BlockQ4_0& x) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
    const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(codes, _mm256_set1_epi8(8));
  }
};

}  // namespace

float MOETIER_DOT_KERNEL(q4_0_q8_0)(int64_t n, const void* w, const void* a) { return MOETIER_DOT_NS::q8_family_single<Q4_0Weights>(n, w, a); }

void MOETIER_DOT_KERNEL_MULTI(q4_0_q8_0)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::q8_family_multi<Q4_0Weights>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
