// SequenceState's context shift and slot snapshot on host memory.
//
// shift(n_keep, n_discard) moves the rows after n_keep + n_discard down by n_discard and
// re-rotates each moved key by −n_discard. A key stored at position p is R(p)·k rounded to the
// cache type; after the shift it should be R(p − d)·k as if it had been computed there.
// Derived bound per element, with r = the norm of the element's rotary pair in k and
// u = 2^-24 (float):
//   * each float rotation with float-rounded cos/sin (relative error ≤ u each) and one
//     multiply, one multiply-add per output: ≤ (|c| + |s|)·r·u (cos/sin) + 2u·r (arithmetic)
//     ≤ (√2 + 2)·u·r; three rotations meet (the stored one, the shift, and the reference
//     computed directly at p − d): ≤ 3·(√2 + 2)·u·r < 11u·r;
//   * f16 cache: the stored row (≤ 2^-11·r per element, then rotated: ≤ √2·2^-11·r), the
//     re-stored row (2^-11·r) and the reference row (2^-11·r): ≤ (√2 + 2)·2^-11·r;
//   * q8_0: a block's error is ≤ d/2 per element (d = the block's max |x| / 127); the stored
//     error of both pair members is rotated (≤ √2·d_max/2), then the re-stored and reference
//     rows add d/2 each: ≤ (√2/2 + 1)·d_max, with d_max from the head's largest |x| (≤ r_max)
//     over 127, plus the float terms.
// V rows and the rows before n_keep do not change, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/ops.h"
#include "state/sequence_state.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

constexpr int64_t kHeadDim = 64, kHeads = 2, kWidth = kHeadDim * kHeads;

// Two attention layers: full rotary, and partial (the first 32 dims of each head).
std::vector<LayerStateSpec> specs() {
  return {{.k_row_elems = kWidth, .v_row_elems = kWidth, .head_dim = kHeadDim, .rope_dims = kHeadDim, .rope_base = 10000.0f},
          {.k_row_elems = kWidth, .v_row_elems = kWidth, .head_dim = kHeadDim, .rope_dims = 32, .rope_base = 1e6f}};
}

void to_row(DType t, const float* x, uint8_t* row) {
  if (t == DType::F32) {
    std::memcpy(row, x, kWidth * sizeof(float));
  } else if (t == DType::F16) {
    f32_to_fp16_row(x, reinterpret_cast<uint16_t*>(row), kWidth);
  } else {
    type_ops(t)->quantize_row(x, row, kWidth);
  }
}

std::vector<float> from_row(DType t, const uint8_t* row) {
  std::vector<float> x(kWidth);
  if (t == DType::F32) {
    std::memcpy(x.data(), row, kWidth * sizeof(float));
  } else if (t == DType::F16) {
    fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), x.data(), kWidth);
  } else {
    type_ops(t)->dequantize_row(row, x.data(), kWidth);
  }
  return x;
}

// k rotated to position pos, as the attention block stores it.
std::vector<float> rotated(const std::vector<float>& k, const LayerStateSpec& s, int64_t pos) {
  std::vector<float> cs(static_cast<size_t>(s.rope_dims)), out = k;
  cpu::rope_angles(s.rope_dims, pos, s.rope_base, cs.data());
  for (int64_t h = 0; h < kHeads; ++h) cpu::rope_neox_with(out.data() + h * kHeadDim, s.rope_dims, cs.data());
  return out;
}

class ContextShift : public ::testing::TestWithParam<DType> {};

TEST_P(ContextShift, MovedKeysAreTheKeysOfTheirNewPosition) {
  const DType type = GetParam();
  const int64_t n = 90, n_keep = 7, n_discard = 40;
  auto seq = SequenceState::create(specs(), {.n_ctx = 128, .type_k = type, .type_v = type});
  ASSERT_TRUE(seq.is_ok()) << seq.status().message();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> raw_k(2), raw_v(2);  // [layer][pos]
  for (int il = 0; il < 2; ++il) {
    for (int64_t p = 0; p < n; ++p) {
      std::vector<float> k(kWidth), v(kWidth);
      for (auto& x : k) x = normal(rng) * 3.0f;
      for (auto& x : v) x = normal(rng);
      raw_k[il].push_back(k);
      raw_v[il].push_back(v);
      to_row(type, rotated(k, seq->spec(il), p).data(), seq->k_row(il, p));
      to_row(type, v.data(), seq->v_row(il, p));
    }
  }
  seq->set_n_past(n);
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kWidth));
  std::vector<std::vector<uint8_t>> kept_k, moved_v;
  for (int il = 0; il < 2; ++il) {
    for (int64_t p = 0; p < n_keep; ++p) kept_k.emplace_back(seq->k_row(il, p), seq->k_row(il, p) + row_bytes);
    for (int64_t p = n_keep + n_discard; p < n; ++p) moved_v.emplace_back(seq->v_row(il, p), seq->v_row(il, p) + row_bytes);
  }

  ASSERT_TRUE(seq->can_shift());
  const Status st = seq->shift(n_keep, n_discard);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(seq->n_past(), n - n_discard);

  constexpr double u = 1.0 / (1 << 24);
  size_t ik = 0, iv = 0;
  for (int il = 0; il < 2; ++il) {
    const LayerStateSpec& s = seq->spec(il);
    for (int64_t p = 0; p < n_keep; ++p) {
      EXPECT_EQ(0, std::memcmp(seq->k_row(il, p), kept_k[ik++].data(), row_bytes)) << "kept row " << p;
    }
    for (int64_t p = n_keep; p < n - n_discard; ++p) {
      EXPECT_EQ(0, std::memcmp(seq->v_row(il, p), moved_v[iv++].data(), row_bytes)) << "V row " << p;
      const std::vector<float>& k = raw_k[il][static_cast<size_t>(p + n_discard)];
      // The reference: the key computed at its new position and stored in the cache type.
      std::vector<uint8_t> ref_row(row_bytes);
      to_row(type, rotated(k, s, p).data(), ref_row.data());
      const std::vector<float> ref = from_row(type, ref_row.data()), got = from_row(type, seq->k_row(il, p));
      for (int64_t h = 0; h < kHeads; ++h) {
        const float* kh = k.data() + h * kHeadDim;
        double r_max = 0;
        for (int64_t i = 0; i < kHeadDim; ++i) r_max = std::max(r_max, double{std::fabs(kh[i])});
        r_max *= std::sqrt(2.0);  // bounds every pair's norm
        for (int64_t i = 0; i < kHeadDim; ++i) {
          const int64_t half = s.rope_dims / 2;
          double r = std::fabs(kh[i]);  // dims past rope_dims are not rotated
          if (i < s.rope_dims) {
            const int64_t j = i < half ? i + half : i - half;
            r = std::hypot(double{kh[i]}, double{kh[j]});
          }
          double bound = 11 * u * r;
          if (type == DType::F16) bound += (std::sqrt(2.0) + 2) * std::ldexp(r, -11);
          if (type == DType::Q8_0) bound += (std::sqrt(2.0) / 2 + 1) * r_max / 127 + 11 * u * r_max;
          const size_t e = static_cast<size_t>(h * kHeadDim + i);
          EXPECT_LE(std::fabs(double{got[e]} - ref[e]), bound)
              << "layer " << il << " pos " << p << " head " << h << " dim " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, ContextShift, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(ContextShift, RefusedWhereKeysOrStateCannotMove) {
  // A recurrent layer folds every token into its state.
  auto hybrid = SequenceState::create({specs()[0], {.conv_state_elems = 12, .ssm_state_elems = 16, .ssm_heads = 1, .ssm_d_k = 4, .ssm_d_v = 4}}, {.n_ctx = 16});
  ASSERT_TRUE(hybrid.is_ok());
  EXPECT_FALSE(hybrid->can_shift());
  EXPECT_FALSE(hybrid->shift(0, 1).is_ok());
  // A model that does not say how its keys encode position.
  auto unknown = SequenceState::create({{.k_row_elems = kWidth, .v_row_elems = kWidth}}, {.n_ctx = 16});
  ASSERT_TRUE(unknown.is_ok());
  EXPECT_FALSE(unknown->can_shift());
  // Ranges outside what the sequence holds change nothing.
  auto seq = SequenceState::create(specs(), {.n_ctx = 16});
  ASSERT_TRUE(seq.is_ok());
  seq->set_n_past(10);
  EXPECT_FALSE(seq->shift(4, 7).is_ok());
  EXPECT_FALSE(seq->shift(-1, 2).is_ok());
  EXPECT_EQ(seq->n_past(), 10);
  EXPECT_TRUE(seq->shift(4, 0).is_ok());
  EXPECT_EQ(seq->n_past(), 10);
}

TEST(SlotSnapshot, RoundTripsAndRefusesOtherLayouts) {
  auto a = SequenceState::create({specs()[0], {.conv_state_elems = 12, .ssm_state_elems = 16, .ssm_heads = 1, .ssm_d_k = 4, .ssm_d_v = 4}}, {.n_ctx = 16});
  ASSERT_TRUE(a.is_ok());
  for (int64_t p = 0; p < 5; ++p) {
    for (size_t b = 0; b < static_cast<size_t>(dtype_row_bytes(DType::F16, kWidth)); ++b) {
      a->k_row(0, p)[b] = static_cast<uint8_t>(p * 7 + b);
      a->v_row(0, p)[b] = static_cast<uint8_t>(p * 5 + b);
    }
  }
  for (int i = 0; i < 12; ++i) a->conv_state(1)[i] = static_cast<float>(i);
  for (int i = 0; i < 16; ++i) a->ssm_state(1)[i] = static_cast<float>(-i);
  a->set_n_past(5);
  auto bytes = a->snapshot();
  ASSERT_TRUE(bytes.is_ok());
  auto b = SequenceState::create({specs()[0], {.conv_state_elems = 12, .ssm_state_elems = 16, .ssm_heads = 1, .ssm_d_k = 4, .ssm_d_v = 4}}, {.n_ctx = 16});
  ASSERT_TRUE(b.is_ok());
  ASSERT_TRUE(b->restore(*bytes).is_ok());
  EXPECT_EQ(b->n_past(), 5);
  auto again = b->snapshot();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *bytes);
  EXPECT_EQ(b->ssm_state(1)[3], -3.0f);
  // Another layout, a shorter file, a longer file.
  auto other = SequenceState::create(specs(), {.n_ctx = 16});
  ASSERT_TRUE(other.is_ok());
  EXPECT_FALSE(other->restore(*bytes).is_ok());
  std::vector<uint8_t> cut(bytes->begin(), bytes->end() - 1), longer = *bytes;
  longer.push_back(0);
  EXPECT_FALSE(b->restore(cut).is_ok());
  EXPECT_FALSE(b->restore(longer).is_ok());
}

}  // namespace
}  // namespace moetier
