// F32 · F32, F16 · F16 and BF16 · BF16 with AVX-512F, one activation row or up to
// kMaxDotRows. Like the scalar references they accumulate in double (every product is exact
// in double, one rounding per FMA), so the result differs from the reference only where the
// two double sums round to different floats (the bound: docs/numerics.md, "Dot products").
//
// Order of the arithmetic (identical for every row of a multi-row call, which is why the
// multi-row results are bit-identical to the single-row ones): four accumulators of 8
// double lanes; element i, i < n rounded down to 32, goes to accumulator (i / 8) % 4, lane
// i % 8; then 8-element steps and one masked step (zeros beyond n) into accumulator 0;
// finally (acc0 + acc1) + (acc2 + acc3), an 8 → 1 lane reduction (3 levels) and one
// rounding to float.
#include "cpu/dot.h"
#include "cpu/dot/avx512_util.h"

namespace moetier::cpu::dot {

namespace {

// Element loaders: 8 values at p as doubles (exact conversions).
struct LoadF32 {
  using T = float;
  static __m512d load(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static __m512d load_masked(const float* p, __mmask8 m) { return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p)); }
};

struct LoadF16 {
  using T = uint16_t;
  static __m512d widen(__m128i h) { return _mm512_cvtps_pd(_mm256_cvtph_ps(h)); }
  static __m512d load(const uint16_t* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m512d load_masked(const uint16_t* p, __mmask8 m) { return widen(_mm_maskz_loadu_epi16(m, p)); }
};

struct LoadBF16 {
  using T = uint16_t;
  static __m512d widen(__m128i h) {
    return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  static __m512d load(const uint16_t* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m512d load_masked(const uint16_t* p, __mmask8 m) { return widen(_mm_maskz_loadu_epi16(m, p)); }
};

template <typename L, int NR>
void float_rows(int64_t n, const void* w, const void* a, int64_t stride, float* out) {
  using T = typename L::T;
  const T* x = static_cast<const T*>(w);
  const T* y[NR];
  for (int j = 0; j < NR; ++j) y[j] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(a) + j * stride);
  __m512d acc[NR][4];
  for (int j = 0; j < NR; ++j) {
    for (int u = 0; u < 4; ++u) acc[j][u] = _mm512_setzero_pd();
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512d wv = L::load(x + i + 8 * u);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[j][u] = _mm512_fmadd_pd(wv, L::load(y[j] + i + 8 * u), acc[j][u]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m512d wv = L::load(x + i);
    for (int j = 0; j < NR; ++j) acc[j][0] = _mm512_fmadd_pd(wv, L::load(y[j] + i), acc[j][0]);
  }
  if (i < n) {
    const __mmask8 m = static_cast<__mmask8>((1u << (n - i)) - 1u);
    const __m512d wv = L::load_masked(x + i, m);
    for (int j = 0; j < NR; ++j) acc[j][0] = _mm512_fmadd_pd(wv, L::load_masked(y[j] + i, m), acc[j][0]);
  }
  for (int j = 0; j < NR; ++j) {
    const __m512d s = _mm512_add_pd(_mm512_add_pd(acc[j][0], acc[j][1]), _mm512_add_pd(acc[j][2], acc[j][3]));
    out[j] = static_cast<float>(_mm512_reduce_add_pd(s));
  }
}

template <typename L>
float float_single(int64_t n, const void* w, const void* a) {
  float out;
  float_rows<L, 1>(n, w, a, 0, &out);
  return out;
}

template <typename L>
void float_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  switch (n_act) {
    case 1: float_rows<L, 1>(n, w, a, stride, out); break;
    case 2: float_rows<L, 2>(n, w, a, stride, out); break;
    case 3: float_rows<L, 3>(n, w, a, stride, out); break;
    default: float_rows<L, 4>(n, w, a, stride, out); break;
  }
}

}  // namespace

float f32_f32_avx512(int64_t n, const void* w, const void* a) { return float_single<LoadF32>(n, w, a); }
float f16_f16_avx512(int64_t n, const void* w, const void* a) { return float_single<LoadF16>(n, w, a); }
float bf16_bf16_avx512(int64_t n, const void* w, const void* a) { return float_single<LoadBF16>(n, w, a); }

void f32_f32_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<LoadF32>(n, w, a, stride, n_act, out);
}
void f16_f16_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<LoadF16>(n, w, a, stride, n_act, out);
}
void bf16_bf16_avx512_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<LoadBF16>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
