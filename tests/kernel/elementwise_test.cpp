// The element-wise ops of cpu/ops.h that run 8 lanes at a time (swiglu, silu_in_place) against
// silu() one element at a time: bit for bit, for every length's tail and for values whose
// e^−x leaves the lanes' range (the scalar path takes those).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/ops.h"

namespace moetier {
namespace {

std::vector<float> test_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = i % 5 == 4 ? wide(rng) : normal(rng);
  return x;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(Elementwise, SwigluAndSiluInPlaceEqualSiluPerElement) {
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 16u, 31u, 512u, 4099u}) {
    const std::vector<float> gate = test_values(n, static_cast<uint32_t>(n) + 1);
    const std::vector<float> up = test_values(n, static_cast<uint32_t>(n) + 1000);
    std::vector<float> want(n), want_silu(n);
    for (size_t i = 0; i < n; ++i) {
      want[i] = cpu::silu(gate[i]) * up[i];
      want_silu[i] = cpu::silu(gate[i]);
    }
    std::vector<float> got(n);
    cpu::swiglu(gate.data(), up.data(), static_cast<int64_t>(n), got.data());
    expect_same_bits(got, want);
    // In place over the up values (the DeltaNet output gate: o[c] = o[c] · silu(z[c])).
    std::vector<float> in_place = up;
    cpu::swiglu(gate.data(), in_place.data(), static_cast<int64_t>(n), in_place.data());
    expect_same_bits(in_place, want);
    std::vector<float> x = gate;
    cpu::silu_in_place(x.data(), static_cast<int64_t>(n));
    expect_same_bits(x, want_silu);
  }
}

TEST(Elementwise, LaneRangeEdgesAndSpecialValues) {
  // Around the edges of the lanes' range (e^−x for −87 ≤ −x ≤ 88) and beyond: subnormal
  // and overflowing e^−x, infinities, NaN, signed zeros, subnormal inputs.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-88.0f, std::nextafter(-88.0f, 0.0f), std::nextafter(-88.0f, -100.0f), 87.0f,
                          std::nextafter(87.0f, 0.0f), std::nextafter(87.0f, 100.0f), 86.9f, -87.9f,
                          103.0f, 105.0f, -89.5f, -100.0f, 0.0f, -0.0f, 1e-40f, -1e-40f,
                          inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f, 0.5f, 20.0f, -20.0f};
  // Each special value also inside an otherwise ordinary group of 8, at every lane.
  for (int lane = 0; lane < 8; ++lane) {
    for (float v : {-88.5f, 90.0f, inf, std::numeric_limits<float>::quiet_NaN()}) {
      for (int i = 0; i < 8; ++i) x.push_back(i == lane ? v : 0.25f * static_cast<float>(i - 3));
    }
  }
  std::vector<float> want(x.size()), ones(x.size(), 1.0f);
  for (size_t i = 0; i < x.size(); ++i) want[i] = cpu::silu(x[i]);
  std::vector<float> got(x.size());
  cpu::swiglu(x.data(), ones.data(), static_cast<int64_t>(x.size()), got.data());
  expect_same_bits(got, want);
  std::vector<float> in_place = x;
  cpu::silu_in_place(in_place.data(), static_cast<int64_t>(in_place.size()));
  expect_same_bits(in_place, want);
}

}  // namespace
}  // namespace moetier
