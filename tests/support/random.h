// Seeded random test data.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace moetier::testing {

// n samples of N(0, scale²), reproducible from `seed`.
inline std::vector<float> random_normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace moetier::testing
