#include "tensor/types/k_scale_min.h"

#include <cmath>

#include "tensor/fp16.h"

namespace moetier::types::kquant {

KHeader quantize_k_super_block(const float* x, const AffineSearch& search, uint8_t codes[kQK_K]) {
  float sub_scale[kSubBlocks];
  float sub_min[kSubBlocks];
  float max_scale = 0;  // both are >= 0: the offset is subtracted, so no sign to track
  float max_min = 0;
  float weights[kSubBlockSize];
  uint8_t scratch[kSubBlockSize];
  for (int j = 0; j < kSubBlocks; ++j) {
    const float* xs = x + kSubBlockSize * j;
    float sum_x2 = 0;
    for (int i = 0; i < kSubBlockSize; ++i) sum_x2 += xs[i] * xs[i];
    const float rms = std::sqrt(sum_x2 / kSubBlockSize);
    for (int i = 0; i < kSubBlockSize; ++i) weights[i] = rms + std::fabs(xs[i]);
    const AffineFit fit =
        fit_scale_and_min(xs, weights, kSubBlockSize, search, codes + kSubBlockSize * j, scratch);
    sub_scale[j] = fit.scale;
    sub_min[j] = fit.min;
    if (fit.scale > max_scale) max_scale = fit.scale;
    if (fit.min > max_min) max_min = fit.min;
  }

  // 6-bit quantization of the sub-block scales and mins relative to their maxima.
  const float inv_d = max_scale > 0 ? kSixBitMax / max_scale : 0.0f;
  const float inv_dmin = max_min > 0 ? kSixBitMax / max_min : 0.0f;
  auto six_bits = [](float v) {
    const int q = nearest_int(v);
    return static_cast<uint8_t>(q < 0 ? 0 : (q > kSixBitMax ? kSixBitMax : q));
  };
  uint8_t scale_q[kSubBlocks];
  uint8_t min_q[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    scale_q[j] = six_bits(inv_d * sub_scale[j]);
    min_q[j] = six_bits(inv_dmin * sub_min[j]);
  }
  KHeader header{};
  pack_scales_mins(scale_q, min_q, header.scales);
  header.d = f32_to_fp16(max_scale / kSixBitMax);
  header.dmin = f32_to_fp16(max_min / kSixBitMax);

  // Re-round every value against the step and offset the decoder will really use.
  const float d = fp16_to_f32(header.d);
  const float dmin = fp16_to_f32(header.dmin);
  const int top = search.max_level;
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * scale_q[j];
    if (step == 0) continue;
    const float offset = dmin * min_q[j];
    for (int i = 0; i < kSubBlockSize; ++i) {
      const int q = nearest_int((x[kSubBlockSize * j + i] + offset) / step);
      codes[kSubBlockSize * j + i] = static_cast<uint8_t>(q < 0 ? 0 : (q > top ? top : q));
    }
  }
  return header;
}

}  // namespace moetier::types::kquant
