// Q5_K: as Q4_K (256-value super-blocks, 8 sub-blocks of 32, 6-bit scales and mins) with
// 5-bit codes: the low 4 bits are laid out exactly like Q4_K's qs, the fifth bit of
// element i of sub-block j is bit j of qh[i].
#include <cstring>

#include "core/status.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/k_scale_min.h"
#include "tensor/types/types.h"

namespace moetier::types {

namespace {

// Search grid of the scale/min fit: 16 trials from 30.5 to 32 levels across the range.
constexpr kquant::AffineSearch kQ5KSearch{
    .max_level = 31, .first_extra = -0.5f, .extra_step = 0.1f, .n_trials = 15};

void pack_codes(const uint8_t codes[kQK_K], uint8_t qs[kQK_K / 2], uint8_t qh[kQK_K / 8]) {
  std::memset(qh, 0, kQK_K / 8);
  for (int g = 0; g < kQK_K / 64; ++g) {
    const uint8_t* low = codes + 64 * g;  // sub-block 2g
    const uint8_t* high = low + 32;       // sub-block 2g+1
    for (int i = 0; i < 32; ++i) {
      qs[32 * g + i] = static_cast<uint8_t>((low[i] & 0x0F) | ((high[i] & 0x0F) << 4));
      qh[i] |= static_cast<uint8_t>(((low[i] >> 4) << (2 * g)) | ((high[i] >> 4) << (2 * g + 1)));
    }
  }
}

}  // namespace

void dequantize_row_q5_k(const void* src, float* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ5_K& block = blocks[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    float* out = dst + b * kQK_K;
    for (int j = 0; j < kquant::kSubBlocks; ++j) {
      const kquant::ScaleMin sm = kquant::unpack_scale_min(block.scales, j);
      const float step = d * sm.scale;
      const float offset = dmin * sm.min;
      const uint8_t* group = block.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);  // even sub-blocks: low nibbles
      for (int i = 0; i < 32; ++i) {
        const int q = ((group[i] >> shift) & 0x0F) | (((block.qh[i] >> j) & 1) << 4);
        out[32 * j + i] = step * q - offset;
      }
    }
  }
}

void quantize_row_q5_k(const float* src, void* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  uint8_t codes[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const kquant::KHeader header = kquant::quantize_k_super_block(src + b * kQK_K, kQ5KSearch, codes);
    BlockQ5_K& block = blocks[b];
    block.d = header.d;
    block.dmin = header.dmin;
    std::memcpy(block.scales, header.scales, sizeof(block.scales));
    pack_codes(codes, block.qs, block.qh);
  }
}

}  // namespace moetier::types
