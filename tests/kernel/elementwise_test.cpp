// The element-wise ops that run a vector of lanes at a time (swiglu, silu_in_place: every
// build of cpu/silu.h this CPU runs, and cpu/ops.h's dispatch) against silu() one element at
// a time: bit for bit, for every length's tail (16-lane vectors, a group of 8, single
// elements) and for values whose e^−x leaves the lanes' range (those groups go element by
// element).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/ops.h"
#include "cpu/silu.h"

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

// The builds to check: cpu/ops.h's entry points (the CPU's tier), then every tier's build this
// CPU runs.
struct Build {
  std::string name;
  void (*swiglu)(const float*, const float*, int64_t, float*);
  void (*silu_in_place)(float*, int64_t);
};
std::vector<Build> builds() {
  std::vector<Build> b = {{"cpu/ops.h", cpu::swiglu, cpu::silu_in_place}};
  for (cpu::IsaTier t : cpu::kIsaTiers) {
    if (!cpu::isa_tier_runs_on(t, cpu_features())) continue;
    const cpu::SiluKernels& k = cpu::silu_kernels(t);
    b.push_back({std::string(cpu::isa_tier_name(k.tier)), k.swiglu, k.silu_in_place});
  }
  return b;
}

TEST(Elementwise, SwigluAndSiluInPlaceEqualSiluPerElement) {
  for (const Build& build : builds()) {
    SCOPED_TRACE(build.name);
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 16u, 24u, 25u, 31u, 40u, 512u, 4099u}) {
      const std::vector<float> gate = test_values(n, static_cast<uint32_t>(n) + 1);
      const std::vector<float> up = test_values(n, static_cast<uint32_t>(n) + 1000);
      std::vector<float> want(n), want_silu(n);
      for (size_t i = 0; i < n; ++i) {
        want[i] = cpu::silu(gate[i]) * up[i];
        want_silu[i] = cpu::silu(gate[i]);
      }
      std::vector<float> got(n);
      build.swiglu(gate.data(), up.data(), static_cast<int64_t>(n), got.data());
      expect_same_bits(got, want);
      // In place over the up values (the DeltaNet output gate: o[c] = o[c] · silu(z[c])), and
      // over the gate values.
      std::vector<float> in_place = up;
      build.swiglu(gate.data(), in_place.data(), static_cast<int64_t>(n), in_place.data());
      expect_same_bits(in_place, want);
      in_place = gate;
      build.swiglu(in_place.data(), up.data(), static_cast<int64_t>(n), in_place.data());
      expect_same_bits(in_place, want);
      std::vector<float> x = gate;
      build.silu_in_place(x.data(), static_cast<int64_t>(n));
      expect_same_bits(x, want_silu);
    }
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
  // Each special value also inside an otherwise ordinary group of 16, at every lane (a
  // vector of any tier: 4, 8 or 16 lanes), and ordinary groups after it.
  for (int lane = 0; lane < 16; ++lane) {
    for (float v : {-88.5f, 90.0f, inf, std::numeric_limits<float>::quiet_NaN()}) {
      for (int i = 0; i < 16; ++i) x.push_back(i == lane ? v : 0.25f * static_cast<float>(i - 3));
    }
  }
  for (int i = 0; i < 40; ++i) x.push_back(0.125f * static_cast<float>(i - 20));
  std::vector<float> want(x.size()), ones(x.size(), 1.0f);
  for (size_t i = 0; i < x.size(); ++i) want[i] = cpu::silu(x[i]);
  for (const Build& build : builds()) {
    SCOPED_TRACE(build.name);
    std::vector<float> got(x.size());
    build.swiglu(x.data(), ones.data(), static_cast<int64_t>(x.size()), got.data());
    expect_same_bits(got, want);
    std::vector<float> in_place = x;
    build.silu_in_place(in_place.data(), static_cast<int64_t>(in_place.size()));
    expect_same_bits(in_place, want);
  }
}

}  // namespace
}  // namespace moetier
