// F32 · F32, F16 · F16 and BF16 · BF16 with AVX2 + FMA (+ F16C for F16), one activation row
// or up to kMaxDotRows of them (the _multi variants).
//
// Accumulation in double, like the scalar references (every product is exact in double, one
// rounding per FMA), in a fixed order per row: four 4-lane double accumulators over steps of
// 16 elements (element i goes to accumulator (i / 4) % 4), remaining steps of 4 into
// accumulator 0, then (acc0 + acc1) + (acc2 + acc3), a 2-level lane tree, then the last
// n % 4 elements, and one rounding to float. The bound this gives and the tests' bound:
// docs/numerics.md, "Dot products". The multi-row variant runs the same per-row code on rows
// 0,1 / 2,3, so each out[j] is bit-identical to the single-row kernel on row j.
#include <bit>
#include <cstdint>

#include "cpu/dot.h"
#include "cpu/dot/avx2_util.h"

namespace moetier::cpu::dot {

namespace {

struct F32Elems {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};

struct F16Elems {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};

struct BF16Elems {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const uint16_t* p) { return std::bit_cast<float>(uint32_t{*p} << 16); }
};

inline double hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// out[r] = Σ_i w[i]·a_r[i] for R (1 or 2) rows, in the order described at the top.
template <class E, int R>
void float_rows(int64_t n, const typename E::T* w, const typename E::T* const* a, float* out) {
  __m256d acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int u = 0; u < 4; ++u) acc[r][u] = _mm256_setzero_pd();
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int h = 0; h < 2; ++h) {
      const __m256 wv = E::load8(w + i + 8 * h);
      const __m256d w_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(wv));
      const __m256d w_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(wv, 1));
      for (int r = 0; r < R; ++r) {
        const __m256 av = E::load8(a[r] + i + 8 * h);
        acc[r][2 * h] = _mm256_fmadd_pd(w_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(av)), acc[r][2 * h]);
        acc[r][2 * h + 1] = _mm256_fmadd_pd(w_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(av, 1)), acc[r][2 * h + 1]);
      }
    }
  }
  for (; i + 4 <= n; i += 4) {
    double wv[4], av[4];
    for (int l = 0; l < 4; ++l) wv[l] = E::load1(w + i + l);
    for (int r = 0; r < R; ++r) {
      for (int l = 0; l < 4; ++l) av[l] = E::load1(a[r] + i + l);
      acc[r][0] = _mm256_fmadd_pd(_mm256_loadu_pd(wv), _mm256_loadu_pd(av), acc[r][0]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256d s = _mm256_add_pd(_mm256_add_pd(acc[r][0], acc[r][1]), _mm256_add_pd(acc[r][2], acc[r][3]));
    double total = hsum_pd(s);
    for (int64_t k = i; k < n; ++k) total += static_cast<double>(E::load1(w + k)) * E::load1(a[r] + k);
    out[r] = static_cast<float>(total);
  }
}

template <class E>
float float_single(int64_t n, const void* w, const void* a) {
  const auto* row = static_cast<const typename E::T*>(a);
  float out;
  float_rows<E, 1>(n, static_cast<const typename E::T*>(w), &row, &out);
  return out;
}

template <class E>
void float_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  CHECK(n_act >= 1 && n_act <= kMaxDotRows);
  const auto* x = static_cast<const typename E::T*>(w);
  const auto row = [&](int j) {
    return reinterpret_cast<const typename E::T*>(static_cast<const uint8_t*>(a) + j * stride);
  };
  int j = 0;
  for (; j + 2 <= n_act; j += 2) {
    const typename E::T* rows[2] = {row(j), row(j + 1)};
    float_rows<E, 2>(n, x, rows, out + j);
  }
  if (j < n_act) {
    const typename E::T* rows[1] = {row(j)};
    float_rows<E, 1>(n, x, rows, out + j);
  }
}

}  // namespace

float f32_f32_avx2(int64_t n, const void* w, const void* a) { return float_single<F32Elems>(n, w, a); }
float f16_f16_avx2(int64_t n, const void* w, const void* a) { return float_single<F16Elems>(n, w, a); }
float bf16_bf16_avx2(int64_t n, const void* w, const void* a) { return float_single<BF16Elems>(n, w, a); }

void f32_f32_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<F32Elems>(n, w, a, stride, n_act, out);
}
void f16_f16_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<F16Elems>(n, w, a, stride, n_act, out);
}
void bf16_bf16_avx2_multi(int64_t n, const void* w, const void* a, int64_t stride, int n_act, float* out) {
  float_multi<BF16Elems>(n, w, a, stride, n_act, out);
}

}  // namespace moetier::cpu::dot
