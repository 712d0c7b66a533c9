// Q4_0 · Q8_0 and Q8_0 · Q8_0, scalar references. Per 32-element block the integer sum
// Σ qw·qa is exact; it is scaled by d_w · d_a once per block.
#include "cpu/dot.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"

namespace moetier::cpu::dot {

float q8_0_q8_0_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += int32_t{x[b].qs[j]} * y[b].qs[j];
    sum += static_cast<float>(isum) * (fp16_to_f32(x[b].d) * fp16_to_f32(y[b].d));
  }
  return sum;
}

void q8_0_act_blocks(int64_t n, const void* activation_row, Q8_0ActBlock* out) {
  const auto* y = static_cast<const BlockQ8_0*>(activation_row);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < kQK8_0; ++j) sum += y[b].qs[j];
    out[b] = {.offset = -128 * sum, .d = fp16_to_f32(y[b].d)};
  }
}

float q4_0_q8_0_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = (x[b].qs[j] & 0x0F) - 8;  // element j
      const int hi = (x[b].qs[j] >> 4) - 8;    // element j + 16
      isum += lo * y[b].qs[j] + hi * y[b].qs[j + kQK4_0 / 2];
    }
    sum += static_cast<float>(isum) * (fp16_to_f32(x[b].d) * fp16_to_f32(y[b].d));
  }
  return sum;
}

}  // namespace moetier::cpu::dot
