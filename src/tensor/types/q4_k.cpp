// Q4_K: 256-value super-blocks, 8 sub-blocks of 32, 4-bit codes with a per-sub-block
// 6-bit scale and 6-bit min (layout in blocks.h, packing in k_scale_min.h).
#include <cstring>

#include "core/status.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/k_scale_min.h"
#include "tensor/types/types.h"

namespace moetier::types {

namespace {

// Search grid of the scale/min fit: 21 trials from 14 to 16 levels across the range.
constexpr kquant::AffineSearch kQ4KSearch{
    .max_level = 15, .first_extra = -1.0f, .extra_step = 0.1f, .n_trials = 20};

// qs is 4 groups of 32 bytes; group g holds sub-block 2g in the low nibbles and
// sub-block 2g+1 in the high nibbles, element i of a sub-block in byte i of its group.
void pack_nibbles(const uint8_t codes[kQK_K], uint8_t qs[kQK_K / 2]) {
  for (int g = 0; g < kQK_K / 64; ++g) {
    const uint8_t* low = codes + 64 * g;
    const uint8_t* high = low + 32;
    for (int i = 0; i < 32; ++i) qs[32 * g + i] = static_cast<uint8_t>(low[i] | (high[i] << 4));
  }
}

}  // namespace

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ4_K& block = blocks[b];
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
        const int q = (group[i] >> shift) & 0x0F;
        out[32 * j + i] = step * q - offset;
      }
    }
  }
}

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
  CHECK(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  uint8_t codes[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const kquant::KHeader header = kquant::quantize_k_super_block(src + b * kQK_K, kQ4KSearch, codes);
    BlockQ4_K& block = blocks[b];
    block.d = header.d;
    block.dmin = header.dmin;
    std::memcpy(block.scales, header.scales, sizeof(block.scales));
    pack_nibbles(codes, block.qs);
  }
}

}  // namespace moetier::types
