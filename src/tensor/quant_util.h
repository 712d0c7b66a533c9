// Small helpers shared by the scalar quantizers in tensor/types/.
#pragma once

#include <cmath>

namespace moetier {

// Round to the nearest integer, ties to even: the rounding ggml's reference quantizers use
// (they add 1.5 * 2^23 and read the mantissa, which rounds in the FPU's default
// nearest-even mode). Matching it matters for bit-exact blocks: std::round would send
// 2.5 to 3 where ggml gets 2. Valid for |x| < 2^22, which every caller guarantees
// (quantized values are at most a few hundred).
inline int nearest_int(float x) {
  constexpr float kRoundingBias = 12582912.0f;  // 1.5 * 2^23: forces the ulp to 1.0
  // Exact without -ffast-math (which this project never enables): the sum rounds to an
  // integer, and subtracting the bias back is exact.
  const float rounded = (x + kRoundingBias) - kRoundingBias;
  return static_cast<int>(rounded);
}

// The element of largest magnitude, with its sign; the first one wins a tie (ggml's
// quantizers scan with a strict `>`, so for {-2, 2} the scale comes out negative).
struct SignedMax {
  float value = 0.0f;      // x[i] itself
  float magnitude = 0.0f;  // |x[i]|
};
inline SignedMax signed_absmax(const float* x, int n) {
  SignedMax best;
  for (int i = 0; i < n; ++i) {
    const float magnitude = std::fabs(x[i]);
    if (magnitude > best.magnitude) best = {x[i], magnitude};
  }
  return best;
}

}  // namespace moetier
