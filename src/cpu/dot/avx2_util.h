// Small AVX2 helpers shared by the cpu/dot/*_avx2.cpp kernels (only included by files
// compiled with -mavx2 -mfma -mf16c).
#pragma once

#include <immintrin.h>

#include <cstdint>

// The float scaling must not be contracted into FMAs (this unit is built with -mfma), so
// that the result stays bit-identical to the scalar reference, which the end-to-end logit
// tests against llama.cpp were validated with.
#define MOETIER_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))

namespace moetier::cpu::dot::avx2 {

// Exact sum of the 8 int32 lanes (callers keep the total within int32).
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 int16 lanes whose low 8 lanes are `lo` and high 8 lanes are `hi`.
inline __m256i halves_i16(int16_t lo, int16_t hi) {
  return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}

}  // namespace moetier::cpu::dot::avx2
