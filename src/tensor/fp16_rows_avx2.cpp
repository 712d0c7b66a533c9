// F16C row conversions. vcvtph2ps is exact; vcvtps2ph with imm 0 rounds to nearest even,
// as f32_to_fp16 does (also for overflow to inf and subnormals), so both are bit-identical
// to the scalar functions (tested in tensor_types_test).
#include <immintrin.h>

#include "tensor/fp16.h"

namespace moetier::f16c {

void fp16_to_f32_row(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i]);
}

void f32_to_fp16_row(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace moetier::f16c
