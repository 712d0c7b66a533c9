// Q4_K, Q5_K, Q6_K: hand-built blocks with known values, the 6-bit scale packing, and
// round-trip properties of the quantizers derived from the formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <limits>
#include <random>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/types/k_scale_min.h"
#include "tensor/types/types.h"

namespace moetier {
namespace {

// Distinct 6-bit values for the 8 sub-blocks; several have the high bits (>= 16) set so
// that the split packing of sub-blocks 4..7 is exercised, and 63 checks the top value.
constexpr uint8_t kScales[8] = {1, 63, 17, 40, 33, 5, 58, 22};
constexpr uint8_t kMins[8] = {62, 0, 9, 48, 27, 51, 14, 36};

// The 12 packed bytes for kScales/kMins, written out from the layout documented in
// blocks.h (independently of the implementation's packer).
std::array<uint8_t, 12> packed_by_hand() {
  std::array<uint8_t, 12> p{};
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>(kScales[j] | ((kScales[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>(kMins[j] | ((kMins[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((kScales[j + 4] & 15) | ((kMins[j + 4] & 15) << 4));
  }
  return p;
}

TEST(KQuantsScalePacking, HandPackedBytesAreKnown) {
  // Spelled out once as literal bytes: sc[4..7] = 33, 5, 58, 22 -> high bits 2, 0, 3, 1;
  // m[4..7] = 27, 51, 14, 36 -> high bits 1, 3, 0, 2.
  const std::array<uint8_t, 12> expected = {
      1 | (2 << 6),  63 | (0 << 6), 17 | (3 << 6), 40 | (1 << 6),   // scales + sc hi
      62 | (1 << 6), 0 | (3 << 6),  9 | (0 << 6),  48 | (2 << 6),   // mins + m hi
      1 | (11 << 4), 5 | (3 << 4),  10 | (14 << 4), 6 | (4 << 4)};  // low nibbles
  EXPECT_EQ(packed_by_hand(), expected);
}

TEST(KQuantsScalePacking, PackAndUnpackAllEightSubBlocks) {
  uint8_t packed[kKScaleSize];
  types::kquant::pack_scales_mins(kScales, kMins, packed);
  const auto by_hand = packed_by_hand();
  for (int i = 0; i < kKScaleSize; ++i) EXPECT_EQ(packed[i], by_hand[i]) << "byte " << i;
  for (int j = 0; j < 8; ++j) {
    const auto sm = types::kquant::unpack_scale_min(packed, j);
    EXPECT_EQ(sm.scale, kScales[j]) << "sub-block " << j;
    EXPECT_EQ(sm.min, kMins[j]) << "sub-block " << j;
  }
}

TEST(KQuantsScalePacking, EveryValuePairRoundTrips) {
  // Each sub-block position, all 64 x 64 (scale, min) pairs, other positions fixed.
  for (int j = 0; j < 8; ++j) {
    for (int s = 0; s < 64; ++s) {
      for (int m = 0; m < 64; ++m) {
        uint8_t scales[8], mins[8];
        std::memcpy(scales, kScales, 8);
        std::memcpy(mins, kMins, 8);
        scales[j] = static_cast<uint8_t>(s);
        mins[j] = static_cast<uint8_t>(m);
        uint8_t packed[kKScaleSize];
        types::kquant::pack_scales_mins(scales, mins, packed);
        for (int k = 0; k < 8; ++k) {
          const auto sm = types::kquant::unpack_scale_min(packed, k);
          ASSERT_EQ(sm.scale, scales[k]);
          ASSERT_EQ(sm.min, mins[k]);
        }
      }
    }
  }
}

// d and dmin are powers of two, so d * sc * q - dmin * m is exact in float and the
// expected values can be compared with ==.
constexpr float kD = 0.125f;
constexpr float kDmin = 0.0625f;

// Code of element i of sub-block j in the hand-built blocks: every code value appears.
int code4(int j, int i) { return (i * 7 + j * 3) % 16; }
int code5(int j, int i) { return (i * 13 + j * 5) % 32; }

TEST(KQuantsQ4K, HandBuiltBlockDequantizesExactly) {
  BlockQ4_K block{};
  block.d = f32_to_fp16(kD);
  block.dmin = f32_to_fp16(kDmin);
  const auto packed = packed_by_hand();
  std::memcpy(block.scales, packed.data(), kKScaleSize);
  // qs: group g (32 bytes) = sub-block 2g in the low nibbles, 2g+1 in the high nibbles.
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 32; ++i)
      block.qs[32 * g + i] = static_cast<uint8_t>(code4(2 * g, i) | (code4(2 * g + 1, i) << 4));
  std::vector<float> out(kQK_K);
  types::dequantize_row_q4_k(&block, out.data(), kQK_K);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(out[32 * j + i], kD * kScales[j] * code4(j, i) - kDmin * kMins[j])
          << "sub-block " << j << " element " << i;
  // Spot checks as literals: element 0 of sub-block 0 has q = 0 -> -dmin * 62;
  // element 1 of sub-block 1 has q = 10 -> 0.125 * 63 * 10 - 0.0625 * 0.
  EXPECT_EQ(out[0], -3.875f);
  EXPECT_EQ(out[33], 78.75f);
}

TEST(KQuantsQ4K, TwoBlocksInARowAreIndependent) {
  BlockQ4_K blocks[2]{};
  for (auto& b : blocks) {
    std::memset(b.scales, 0, sizeof(b.scales));
    b.scales[0] = 1;  // sc[0] = 1, everything else 0
  }
  blocks[0].d = f32_to_fp16(1.0f);
  blocks[1].d = f32_to_fp16(2.0f);
  blocks[0].qs[0] = 0x03;
  blocks[1].qs[0] = 0x05;
  std::vector<float> out(2 * kQK_K);
  types::dequantize_row_q4_k(blocks, out.data(), 2 * kQK_K);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[kQK_K], 10.0f);
}

TEST(KQuantsQ5K, HandBuiltBlockDequantizesExactly) {
  BlockQ5_K block{};
  block.d = f32_to_fp16(kD);
  block.dmin = f32_to_fp16(kDmin);
  const auto packed = packed_by_hand();
  std::memcpy(block.scales, packed.data(), kKScaleSize);
  // Low 4 bits as in Q4_K; bit j of qh[i] = bit 4 of element i of sub-block j.
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 32; ++i)
      block.qs[32 * g + i] =
          static_cast<uint8_t>((code5(2 * g, i) & 15) | ((code5(2 * g + 1, i) & 15) << 4));
  for (int i = 0; i < 32; ++i) {
    uint8_t h = 0;
    for (int j = 0; j < 8; ++j) h |= static_cast<uint8_t>((code5(j, i) >> 4) << j);
    block.qh[i] = h;
  }
  std::vector<float> out(kQK_K);
  types::dequantize_row_q5_k(&block, out.data(), kQK_K);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(out[32 * j + i], kD * kScales[j] * code5(j, i) - kDmin * kMins[j])
          << "sub-block " << j << " element " << i;
}

TEST(KQuantsQ5K, HighBitOfEachSubBlockComesFromItsOwnQhBit) {
  // All low bits 0, sc = 1 for every sub-block, no mins: value = 16 * d * highbit.
  BlockQ5_K block{};
  block.d = f32_to_fp16(1.0f);
  const uint8_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const uint8_t zeros[8] = {};
  types::kquant::pack_scales_mins(ones, zeros, block.scales);
  block.qh[5] = 0b10100100;  // element 5 of sub-blocks 2, 5, 7
  std::vector<float> out(kQK_K);
  types::dequantize_row_q5_k(&block, out.data(), kQK_K);
  for (int e = 0; e < kQK_K; ++e) {
    const bool set = e == 2 * 32 + 5 || e == 5 * 32 + 5 || e == 7 * 32 + 5;
    ASSERT_EQ(out[e], set ? 16.0f : 0.0f) << "element " << e;
  }
}

// Q6_K hand-built block: every 6-bit code, distinct int8 scales including both extremes.
constexpr int8_t kQ6Scales[16] = {-128, 127, 1, -1, 64, -64, 3, 100, -77, 45, 12, -5, 33, 90, -100, 7};
int code6(int e) { return (e * 29 + 11) % 64; }

TEST(KQuantsQ6K, HandBuiltBlockDequantizesExactly) {
  BlockQ6_K block{};
  const float d = 0.015625f;  // 2^-6: d * sc * (q - 32) exact
  block.d = f32_to_fp16(d);
  std::memcpy(block.scales, kQ6Scales, sizeof(kQ6Scales));
  // Half h, element 32k + i: low 4 bits in ql[64h + 32(k%2) + i] (nibble k/2), high 2 bits
  // at bit 2k of qh[32h + i].
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 32; ++i) {
        const int q = code6(128 * h + 32 * k + i);
        block.ql[64 * h + 32 * (k % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (k / 2)));
        block.qh[32 * h + i] |= static_cast<uint8_t>((q >> 4) << (2 * k));
      }
  std::vector<float> out(kQK_K);
  types::dequantize_row_q6_k(&block, out.data(), kQK_K);
  for (int e = 0; e < kQK_K; ++e)
    ASSERT_EQ(out[e], d * kQ6Scales[e / 16] * (code6(e) - 32)) << "element " << e;
}

TEST(KQuantsQ6K, LiteralBytes) {
  BlockQ6_K block{};
  block.d = f32_to_fp16(1.0f);
  for (auto& s : block.scales) s = 1;
  block.ql[0] = 0xA5;    // element 0: low 5, element 64: low 10
  block.ql[32] = 0x3C;   // element 32: low 12, element 96: low 3
  block.qh[0] = 0b11100100;  // high bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  block.ql[64 + 7] = 0x0F;   // element 128 + 7: low 15, high 0
  std::vector<float> out(kQK_K);
  types::dequantize_row_q6_k(&block, out.data(), kQK_K);
  EXPECT_EQ(out[0], 5.0f - 32);
  EXPECT_EQ(out[32], 12.0f + 16 - 32);
  EXPECT_EQ(out[64], 10.0f + 32 - 32);
  EXPECT_EQ(out[96], 3.0f + 48 - 32);
  EXPECT_EQ(out[135], 15.0f - 32);
  EXPECT_EQ(out[1], -32.0f);
}

// ---- Quantizer properties ----------------------------------------------------------

std::vector<float> gaussian_row(int n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// The decoder of each sub-block is a uniform grid {step * q - offset : q = 0..n_levels-1}.
// The quantizer's last step rounds (x + offset) / step to the nearest code and clips, so
// every decoded value must be the grid point nearest to x. The error is then at most
// step / 2 for x inside [-offset, step * (n_levels - 1) - offset] and exactly the distance
// to the nearer end outside it. The only slack is float rounding: (x + offset) / step and
// step * q - offset each round once (relative 2^-24), so we allow 4 ulps of the magnitudes
// involved. A sub-block with step 0 decodes to -offset for every code.
void expect_nearest_grid_point(float x, float y, float step, float offset, int n_levels, int e) {
  double best = std::numeric_limits<double>::infinity();
  for (int q = 0; q < n_levels; ++q)
    best = std::min(best, std::fabs(double(step) * q - offset - x));
  const double slack = 4 * 0x1p-24 * (std::fabs(x) + std::fabs(step) * n_levels + std::fabs(offset));
  ASSERT_LE(std::fabs(double(y) - x), best + slack) << "element " << e << " x=" << x << " y=" << y;
}

// Q4_K/Q5_K: step and offset of each sub-block read back from the block header.
template <typename Block>
void check_affine_blocks(const std::vector<float>& x, const std::vector<Block>& blocks,
                         const std::vector<float>& y, int n_levels) {
  for (size_t b = 0; b < blocks.size(); ++b) {
    const float d = fp16_to_f32(blocks[b].d);
    const float dmin = fp16_to_f32(blocks[b].dmin);
    ASSERT_GE(d, 0.0f);
    ASSERT_GE(dmin, 0.0f);
    for (int j = 0; j < 8; ++j) {
      const auto sm = types::kquant::unpack_scale_min(blocks[b].scales, j);
      for (int i = 0; i < 32; ++i) {
        const size_t e = b * kQK_K + 32 * j + i;
        expect_nearest_grid_point(x[e], y[e], d * sm.scale, dmin * sm.min, n_levels, int(e));
      }
    }
  }
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s / a.size());
}

TEST(KQuantsQ4K, QuantizeGivesNearestGridPointPerElement) {
  const int n = 64 * kQK_K;
  for (float sigma : {1.0f, 1e-3f, 300.0f}) {
    const auto x = gaussian_row(n, 42, sigma);
    std::vector<BlockQ4_K> q(n / kQK_K);
    std::vector<float> y(n);
    types::quantize_row_q4_k(x.data(), q.data(), n);
    types::dequantize_row_q4_k(q.data(), y.data(), n);
    check_affine_blocks(x, q, y, 16);
  }
}

TEST(KQuantsQ5K, QuantizeGivesNearestGridPointPerElement) {
  const int n = 64 * kQK_K;
  for (float sigma : {1.0f, 1e-3f, 300.0f}) {
    const auto x = gaussian_row(n, 43, sigma);
    std::vector<BlockQ5_K> q(n / kQK_K);
    std::vector<float> y(n);
    types::quantize_row_q5_k(x.data(), q.data(), n);
    types::dequantize_row_q5_k(q.data(), y.data(), n);
    check_affine_blocks(x, q, y, 32);
  }
}

TEST(KQuantsQ6K, QuantizeGivesNearestGridPointPerElement) {
  const int n = 64 * kQK_K;
  for (float sigma : {1.0f, 1e-3f, 300.0f}) {
    const auto x = gaussian_row(n, 44, sigma);
    std::vector<BlockQ6_K> q(n / kQK_K);
    std::vector<float> y(n);
    types::quantize_row_q6_k(x.data(), q.data(), n);
    types::dequantize_row_q6_k(q.data(), y.data(), n);
    for (size_t b = 0; b < q.size(); ++b) {
      const float d = fp16_to_f32(q[b].d);
      for (int e = 0; e < kQK_K; ++e) {
        // Grid {step * (q - 32)}: the same as an affine grid with offset 32 * step.
        const float step = d * q[b].scales[e / 16];
        const size_t k = b * kQK_K + e;
        expect_nearest_grid_point(x[k], y[k], step, 32 * step, 64, int(k));
      }
    }
  }
}

// The scale/min fit starts from the plain min/max mapping (lo -> 0, hi -> max_level) and
// only accepts trials with a smaller weighted squared error, so its result can never be
// worse than that mapping; the min/max mapping's error per element is at most
// (hi - lo) / (2 * max_level) (round to nearest, nothing clipped).
TEST(KQuantsAffineFit, NeverWorseThanMinMaxMapping) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int max_level : {15, 31}) {
    const types::kquant::AffineSearch search{
        .max_level = max_level, .first_extra = -1.0f, .extra_step = 0.1f, .n_trials = 20};
    for (int t = 0; t < 500; ++t) {
      float x[32], w[32];
      uint8_t codes[32], scratch[32];
      const float shift = t % 3 == 0 ? 2.0f : 0.0f;  // some all-positive sub-blocks
      for (int i = 0; i < 32; ++i) {
        x[i] = dist(rng) + shift;
        w[i] = 0.5f + std::fabs(x[i]);
      }
      const auto fit = types::kquant::fit_scale_and_min(x, w, 32, search, codes, scratch);
      ASSERT_GE(fit.scale, 0.0f);
      ASSERT_GE(fit.min, 0.0f);
      float lo = 0, hi = x[0];
      for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
      const double half_step = (hi - lo) / (2.0 * max_level);
      double err = 0, bound = 0;
      for (int i = 0; i < 32; ++i) {
        ASSERT_LE(codes[i], max_level);
        const double diff = double(fit.scale) * codes[i] - fit.min - x[i];
        err += w[i] * diff * diff;
        bound += w[i] * half_step * half_step;
      }
      ASSERT_LE(err, bound * (1 + 1e-4)) << "trial " << t;
    }
  }
}

// RMSE on N(0, 1) against the plain grid of each format, computed from the same data: a
// uniform quantizer with step s that covers its values has error variance s^2 / 12.
// The plain grids are what the searches start from: Q4_K/Q5_K map each 32-value
// sub-block's [min(lo, 0), hi] onto 15 / 31 steps; Q6_K maps each 16-value sub-block's
// largest |x| onto 32 steps. Each search only accepts grids with a lower (|x|-weighted)
// error, so the result must come out below the plain grid's sqrt(mean s^2 / 12). Storing
// the scales as integers times an fp16 d moves each step by at most 0.5 / scale relative;
// for Gaussian sub-blocks the integer scales are mostly 30..63 (Q4_K/Q5_K) or 60..128
// (Q6_K), i.e. about 1%, far less than the ~10% the searches gain (measured: Q4_K
// 0.0714 vs 0.0808, Q5_K 0.0361 vs 0.0391, Q6_K 0.0177 vs 0.0192).
double plain_grid_rmse(const std::vector<float>& x, int sub_block, int steps, bool symmetric) {
  double sum_var = 0;
  const size_t n_sub = x.size() / sub_block;
  for (size_t b = 0; b < n_sub; ++b) {
    float lo = 0, hi = x[b * sub_block], amax = 0;
    for (int i = 0; i < sub_block; ++i) {
      const float v = x[b * sub_block + i];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      amax = std::max(amax, std::fabs(v));
    }
    const double step = symmetric ? amax / double(steps) : (hi - lo) / double(steps);
    sum_var += step * step / 12;
  }
  return std::sqrt(sum_var / n_sub);
}

TEST(KQuantsRoundTrip, GaussianRmseBelowPlainGrid) {
  const int n = 256 * kQK_K;
  const auto x = gaussian_row(n, 1234);
  std::vector<float> y(n);
  {
    std::vector<BlockQ4_K> q(n / kQK_K);
    types::quantize_row_q4_k(x.data(), q.data(), n);
    types::dequantize_row_q4_k(q.data(), y.data(), n);
    EXPECT_LT(rmse(x, y), plain_grid_rmse(x, 32, 15, false));
  }
  {
    std::vector<BlockQ5_K> q(n / kQK_K);
    types::quantize_row_q5_k(x.data(), q.data(), n);
    types::dequantize_row_q5_k(q.data(), y.data(), n);
    EXPECT_LT(rmse(x, y), plain_grid_rmse(x, 32, 31, false));
  }
  {
    std::vector<BlockQ6_K> q(n / kQK_K);
    types::quantize_row_q6_k(x.data(), q.data(), n);
    types::dequantize_row_q6_k(q.data(), y.data(), n);
    EXPECT_LT(rmse(x, y), plain_grid_rmse(x, 16, 32, true));
  }
}

TEST(KQuantsRoundTrip, ZeroRowsStayZero) {
  const int n = 2 * kQK_K;
  const std::vector<float> x(n, 0.0f);
  std::vector<float> y(n, 1.0f);
  std::vector<BlockQ4_K> q4(2);
  types::quantize_row_q4_k(x.data(), q4.data(), n);
  types::dequantize_row_q4_k(q4.data(), y.data(), n);
  for (float v : y) ASSERT_EQ(v, 0.0f);
  std::vector<BlockQ5_K> q5(2);
  types::quantize_row_q5_k(x.data(), q5.data(), n);
  types::dequantize_row_q5_k(q5.data(), y.data(), n);
  for (float v : y) ASSERT_EQ(v, 0.0f);
  std::vector<BlockQ6_K> q6(2);
  types::quantize_row_q6_k(x.data(), q6.data(), n);
  types::dequantize_row_q6_k(q6.data(), y.data(), n);
  for (float v : y) ASSERT_EQ(v, 0.0f);
}

// Re-quantizing decoded values is not a fixed point in general (the 6-bit/int8 scale
// rounding and the search can settle on another grid: on N(0,1) rows about 0.1% of Q4_K
// and 7% of Q5_K blocks change on a second pass). It is for Q6_K blocks of this shape:
// in every sub-block the value of largest magnitude is unique and sits at level -32 (code
// 0), no scale is 0, and the largest |scale| is -128. Then the first trial of the
// sub-block fit maps each decoded value exactly onto its level (zero error, which no
// later trial beats), the fitted scale is d * sc[j] up to float rounding, the largest one
// maps back to -128 and d (an fp16 value) is recovered exactly, so every scale and code is
// reproduced: the block is a fixed point of dequantize -> quantize.
TEST(KQuantsQ6K, RequantizingExtremeAtMinus32IsAFixedPoint) {
  BlockQ6_K block{};
  block.d = f32_to_fp16(0.0009765625f);  // 2^-10
  const int8_t scales[16] = {-128, 127, 5, -3, 64, -64, 1, -1, 99, -100, 17, -17, 42, -42, 120, -7};
  std::memcpy(block.scales, scales, sizeof(scales));
  uint8_t codes[kQK_K];
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> code(1, 63);  // levels -31..31: smaller than |-32|
  for (int e = 0; e < kQK_K; ++e) codes[e] = static_cast<uint8_t>(e % 16 == 3 ? 0 : code(rng));
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 32; ++i) {
        const int q = codes[128 * h + 32 * k + i];
        block.ql[64 * h + 32 * (k % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (k / 2)));
        block.qh[32 * h + i] |= static_cast<uint8_t>((q >> 4) << (2 * k));
      }
  std::vector<float> y(kQK_K);
  types::dequantize_row_q6_k(&block, y.data(), kQK_K);
  BlockQ6_K again{};
  types::quantize_row_q6_k(y.data(), &again, kQK_K);
  EXPECT_EQ(std::memcmp(&block, &again, sizeof(block)), 0);
}

// ---- Byte identity with llama.cpp -----------------------------------------------------

// qwen35moe-tiny-mixed.gguf holds tensors that llama-quantize (no importance matrix, so
// ggml's reference quantizers quantize_row_q{4,5,6}_K_ref) made from the same-named F32
// tensors of qwen35moe-tiny-f32.gguf. Our quantizers follow the same algorithm in the same
// float evaluation order, so they must reproduce those blocks byte for byte; and our
// dequantization of llama.cpp's blocks must give each original value's nearest grid point.
std::vector<uint8_t> read_tensor_bytes(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  std::vector<uint8_t> bytes(t.n_bytes);
  std::ifstream in(file.path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(t.file_offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(in.good()) << "reading " << t.name << " from " << file.path;
  return bytes;
}

TEST(KQuantsReference, QuantizersMatchLlamaCppBlocksOnReferenceModel) {
  const std::string dir = std::string(MOETIER_REF_DIR) + "/models/";
  auto f32_file = gguf::read_header(dir + "qwen35moe-tiny-f32.gguf");
  auto mixed_file = gguf::read_header(dir + "qwen35moe-tiny-mixed.gguf");
  ASSERT_TRUE(f32_file.is_ok()) << f32_file.status().message();
  ASSERT_TRUE(mixed_file.is_ok()) << mixed_file.status().message();
  int checked[3] = {0, 0, 0};  // tensors of Q4_K, Q5_K, Q6_K
  for (const auto& t : mixed_file.value().tensors) {
    const int kind = t.type == DType::Q4_K ? 0 : t.type == DType::Q5_K ? 1 : t.type == DType::Q6_K ? 2 : -1;
    if (kind < 0) continue;
    SCOPED_TRACE(t.name);
    const gguf::TensorInfo* src = f32_file.value().find_tensor(t.name);
    ASSERT_NE(src, nullptr);
    ASSERT_EQ(src->type, DType::F32);
    ASSERT_EQ(src->n_elements, t.n_elements);
    const auto src_bytes = read_tensor_bytes(f32_file.value(), *src);
    const auto expected = read_tensor_bytes(mixed_file.value(), t);
    std::vector<float> x(src->n_elements);
    std::memcpy(x.data(), src_bytes.data(), x.size() * sizeof(float));
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> ours(expected.size());
    std::vector<float> y(x.size());
    if (kind == 0) {
      ASSERT_EQ(expected.size(), x.size() / kQK_K * sizeof(BlockQ4_K));
      types::quantize_row_q4_k(x.data(), ours.data(), n);
      std::vector<BlockQ4_K> theirs(x.size() / kQK_K);
      std::memcpy(theirs.data(), expected.data(), expected.size());
      types::dequantize_row_q4_k(theirs.data(), y.data(), n);
      check_affine_blocks(x, theirs, y, 16);
    } else if (kind == 1) {
      ASSERT_EQ(expected.size(), x.size() / kQK_K * sizeof(BlockQ5_K));
      types::quantize_row_q5_k(x.data(), ours.data(), n);
      std::vector<BlockQ5_K> theirs(x.size() / kQK_K);
      std::memcpy(theirs.data(), expected.data(), expected.size());
      types::dequantize_row_q5_k(theirs.data(), y.data(), n);
      check_affine_blocks(x, theirs, y, 32);
    } else {
      ASSERT_EQ(expected.size(), x.size() / kQK_K * sizeof(BlockQ6_K));
      types::quantize_row_q6_k(x.data(), ours.data(), n);
      std::vector<BlockQ6_K> theirs(x.size() / kQK_K);
      std::memcpy(theirs.data(), expected.data(), expected.size());
      types::dequantize_row_q6_k(theirs.data(), y.data(), n);
      for (size_t b = 0; b < theirs.size(); ++b)
        for (int e = 0; e < kQK_K; ++e) {
          const float step = fp16_to_f32(theirs[b].d) * theirs[b].scales[e / 16];
          const size_t k = b * kQK_K + e;
          expect_nearest_grid_point(x[k], y[k], step, 32 * step, 64, int(k));
        }
    }
    size_t first_diff = 0;
    while (first_diff < ours.size() && ours[first_diff] == expected[first_diff]) ++first_diff;
    EXPECT_EQ(first_diff, ours.size()) << "first differing byte " << first_diff << " of " << ours.size();
    ++checked[kind];
  }
  // The manifest lists 6 tensors of each type in this file.
  EXPECT_EQ(checked[0], 6);
  EXPECT_EQ(checked[1], 6);
  EXPECT_EQ(checked[2], 6);
}

}  // namespace
}  // namespace moetier
