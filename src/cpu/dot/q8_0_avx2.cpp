// Q8_0 · Q8_0 with AVX2, one activation row or up to kMaxDotRows of them; the arithmetic
// and its exactness argument are in q8_0_family_avx2.h (weights: the stored codes).
#include "cpu/dot.h"
#include "cpu/dot/q8_0_family_avx2.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q8_0Weights {
  using WBlock = BlockQ8_0;
  static __m256i weights(const BlockQ8_0& x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)); }
};

}  // namespace

float MOETIER_DOT_KERNEL(q8_0_q8_0)(int64_t n, const void* w, const void* a) { return MOETIER_DOT_NS::q8_family_single<Q8_0Weights>(n, w, a); }

void MOETIER_DOT_KERNEL_MULTI(q8_0_q8_0)(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  MOETIER_DOT_NS::q8_family_multi<Q8_0Weights>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
