// Scalar references for the K-quant families and IQ4_XS against Q8_K activations.
// Each weight super-block (256 elements) is unpacked to its integer codes and integer
// sub-block scales, so the whole inner product is an exact integer sum; only the final
// scaling by the fp16 super-block scale(s) and the activation scale is floating point:
//   Q4_K/Q5_K:  d_w·d_a·Σ_j sc_j·(q_w·q_a)_j  −  dmin_w·d_a·Σ_j m_j·(Σ q_a)_j
//   Q6_K:       d_w·d_a·Σ_j sc_j·((q_w − 32)·q_a)_j
//   IQ4_XS:     d_w·d_a·Σ_j (ls_j − 32)·(grid[q_w]·q_a)_j
#include "cpu/dot.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/k_scale_min.h"

namespace moetier::cpu::dot {

namespace {

// Σ over a Q8_K block's 32-element sub-block j of q_a; from the 16-element bsums.
int32_t q8k_sum32(const BlockQ8_K& y, int j) { return int32_t{y.bsums[2 * j]} + y.bsums[2 * j + 1]; }

}  // namespace

float q4_k_q8_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      const auto [sc, m] = types::kquant::unpack_scale_min(x[b].scales, j);
      const uint8_t* qs = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) isum += ((qs[l] >> shift) & 0x0F) * int32_t{y[b].qs[32 * j + l]};
      scaled += sc * isum;
      mins += m * q8k_sum32(y[b], j);
    }
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled) -
           fp16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(mins);
  }
  return sum;
}

float q5_k_q8_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      const auto [sc, m] = types::kquant::unpack_scale_min(x[b].scales, j);
      const uint8_t* qs = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 0x0F) | (((x[b].qh[l] >> j) & 1) << 4);
        isum += q * int32_t{y[b].qs[32 * j + l]};
      }
      scaled += sc * isum;
      mins += m * q8k_sum32(y[b], j);
    }
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled) -
           fp16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(mins);
  }
  return sum;
}

float q6_k_q8_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t scaled = 0;
    // Two halves of 128 elements; in each, ql[0..63] and qh[0..31] describe 4 runs of 32.
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      const int8_t* sc = x[b].scales + 8 * half;
      const int8_t* qa = y[b].qs + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int s = l / 16;
        scaled += sc[s + 0] * q1 * qa[l] + sc[s + 2] * q2 * qa[l + 32] + sc[s + 4] * q3 * qa[l + 64] +
                  sc[s + 6] * q4 * qa[l + 96];
      }
    }
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled);
  }
  return sum;
}

float iq4_xs_q8_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t scaled = 0;
    for (int j = 0; j < 8; ++j) {
      const int ls = ((x[b].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((x[b].scales_h >> (2 * j)) & 3) << 4);
      const uint8_t* qs = x[b].qs + 16 * j;
      const int8_t* qa = y[b].qs + 32 * j;
      int32_t isum = 0;
      for (int l = 0; l < 16; ++l) {
        isum += kIQ4NLValues[qs[l] & 0x0F] * qa[l] + kIQ4NLValues[qs[l] >> 4] * qa[l + 16];
      }
      scaled += (ls - 32) * isum;
    }
    sum += fp16_to_f32(x[b].d) * y[b].d * static_cast<float>(scaled);
  }
  return sum;
}

}  // namespace moetier::cpu::dot
