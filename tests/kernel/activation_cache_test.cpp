#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cpu/matmul.h"

namespace moetier::cpu {
namespace {

TEST(ActivationCache, ConvertsOncePerActivationTypeAndForgetsOnReset) {
  ThreadPool pool(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t n_rows = 3, n_in = 512;
  std::vector<float> x(static_cast<size_t>(n_rows * n_in)), y(x.size());
  for (auto& v : x) v = g(rng);
  for (auto& v : y) v = g(rng);

  ActivationCache cache;
  cache.reset(x.data(), n_rows, n_in);
  const QuantizedActivations& k4 = cache.get(DType::Q4_K, pool);
  const QuantizedActivations& k6 = cache.get(DType::Q6_K, pool);  // same activation type: Q8_K
  EXPECT_EQ(&k4, &k6);
  EXPECT_EQ(k4.type, DType::Q8_K);
  const QuantizedActivations& q8 = cache.get(DType::Q8_0, pool);
  EXPECT_EQ(q8.type, DType::Q8_0);

  QuantizedActivations direct;
  quantize_activations(DType::Q8_K, x.data(), n_rows, n_in, direct, pool);
  const size_t bytes = static_cast<size_t>(direct.row_bytes * n_rows);
  EXPECT_EQ(std::vector<uint8_t>(k4.bytes.begin(), k4.bytes.begin() + static_cast<int64_t>(bytes)),
            std::vector<uint8_t>(direct.bytes.begin(), direct.bytes.begin() + static_cast<int64_t>(bytes)));

  // A new input must be converted again, not served from the old conversion.
  cache.reset(y.data(), n_rows, n_in);
  quantize_activations(DType::Q8_K, y.data(), n_rows, n_in, direct, pool);
  const QuantizedActivations& again = cache.get(DType::Q5_K, pool);
  EXPECT_EQ(std::vector<uint8_t>(again.bytes.begin(), again.bytes.begin() + static_cast<int64_t>(bytes)),
            std::vector<uint8_t>(direct.bytes.begin(), direct.bytes.begin() + static_cast<int64_t>(bytes)));
}

}  // namespace
}  // namespace moetier::cpu
