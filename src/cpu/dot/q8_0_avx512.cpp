// Q8_0 · Q8_0 with AVX-512 (F, BW, VL, VNNI), one activation row or up to kMaxDotRows.
// Per 32-element block the integer sum is exact (vpdpbusd, see the integer ranges and the
// [−127, 127] activation precondition in avx512_util.h) and the float scaling and
// accumulation are q8_0_q8_0_scalar's, per block in block order, so results are
// bit-identical to the scalar ones (and multi-row to single-row).
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"
#include "tensor/blocks.h"

namespace moetier::cpu::dot {

namespace {

struct Q8_0 {
  using WBlock = BlockQ8_0;
  static __m256i codes(const BlockQ8_0& x) { return avx512::load32(x.qs); }
};

}  // namespace

float q8_0_q8_0_avx512(int64_t n, const void* w, const void* a) {
  return avx512::q8_0_family_single<Q8_0>(n, w, a);
}

void q8_0_q8_0_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  avx512::q8_0_family_multi<Q8_0>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
