// Dot-product kernels against a float64 reference built from the formats' own
// dequantizers: Σ dequant(w)[i] · dequant(a)[i]. Every kernel (scalar now, SIMD variants
// later) must agree with it.
//
// Tolerance: the kernels sum integer products exactly within a block and then do a few
// float32 multiplications and one float32 addition per block (or per element for the float
// types), so the error is bounded by the float32 rounding of each partial: at most
// (k + n_terms) · 2^-24 · Σ|w_i·a_i| with k ≈ 4 roundings per term. We use
// 8 · n_terms · 2^-24 · Σ|w_i·a_i|, with n_terms the number of blocks (or elements).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/dot.h"
#include "cpu/matmul.h"
#include "tensor/type_ops.h"

namespace moetier::cpu {
namespace {

struct Row {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized
};

Row make_row(DType type, const std::vector<float>& x, bool activation) {
  const int64_t n = static_cast<int64_t>(x.size());
  Row r;
  r.bytes.resize(static_cast<size_t>(dtype_row_bytes(type, n)));
  if (activation) {
    QuantizedActivations q;
    ThreadPool pool(1);
    quantize_activations(type, x.data(), 1, n, q, pool);
    std::copy(q.bytes.begin(), q.bytes.begin() + static_cast<int64_t>(r.bytes.size()), r.bytes.begin());
  } else {
    type_ops(type)->quantize_row(x.data(), r.bytes.data(), n);
  }
  r.values.resize(x.size());
  type_ops(type)->dequantize_row(r.bytes.data(), r.values.data(), n);
  return r;
}

class DotKernels : public ::testing::TestWithParam<DType> {};

TEST_P(DotKernels, MatchFloat64ReferenceOfDequantizedRows) {
  const DType wt = GetParam();
  const DotKernel* scalar = scalar_dot_kernel(wt);
  ASSERT_NE(scalar, nullptr);
  const DotKernel* best = best_dot_kernel(wt, cpu_features());
  std::mt19937 rng(42);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (int64_t n : {256, 512, 2048}) {
    for (int trial = 0; trial < 8; ++trial) {
      std::vector<float> w(static_cast<size_t>(n)), a(static_cast<size_t>(n));
      for (auto& v : w) v = gauss(rng) * 0.05f;
      for (auto& v : a) v = gauss(rng) * (trial % 2 ? 3.0f : 0.5f);
      const Row wr = make_row(wt, w, false);
      const Row ar = make_row(scalar->activation_type, a, true);
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += double{wr.values[i]} * ar.values[i];
        mag += std::fabs(double{wr.values[i]} * ar.values[i]);
      }
      const int64_t block = dtype_traits(wt).block_elems;
      const double n_terms = block > 1 ? static_cast<double>(n / block) : static_cast<double>(n);
      const double tol = 8.0 * n_terms * std::ldexp(1.0, -24) * mag + 1e-30;
      EXPECT_NEAR(scalar->fn(n, wr.bytes.data(), ar.bytes.data()), ref, tol) << dtype_name(wt) << " n=" << n;
      EXPECT_NEAR(best->fn(n, wr.bytes.data(), ar.bytes.data()), ref, tol)
          << dtype_name(wt) << " n=" << n << " isa=" << best->isa;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DotKernels,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_XS),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(DotKernels, ActivationTypesFollowGgml) {
  EXPECT_EQ(*activation_type_for(DType::Q4_K), DType::Q8_K);
  EXPECT_EQ(*activation_type_for(DType::Q5_K), DType::Q8_K);
  EXPECT_EQ(*activation_type_for(DType::Q6_K), DType::Q8_K);
  EXPECT_EQ(*activation_type_for(DType::IQ4_XS), DType::Q8_K);
  EXPECT_EQ(*activation_type_for(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(*activation_type_for(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(*activation_type_for(DType::F16), DType::F16);
  EXPECT_EQ(*activation_type_for(DType::BF16), DType::BF16);
  EXPECT_EQ(*activation_type_for(DType::F32), DType::F32);
  EXPECT_FALSE(activation_type_for(DType::Q2_K).has_value());
}

TEST(Matmul, ThreadedEqualsSingleThreaded) {
  // Output rows are split across threads; each dot product is computed the same way, so
  // the result must be bit-identical.
  const int64_t n_in = 512, n_out = 67, n_rows = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in * n_rows));
  for (auto& v : w) v = gauss(rng);
  for (auto& v : x) v = gauss(rng);
  std::vector<uint8_t> wq(static_cast<size_t>(dtype_row_bytes(DType::Q4_K, n_in) * n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    type_ops(DType::Q4_K)->quantize_row(&w[r * n_in], wq.data() + r * dtype_row_bytes(DType::Q4_K, n_in), n_in);
  }
  const WeightMatrix m{.type = DType::Q4_K, .n_in = n_in, .n_out = n_out, .row_bytes = dtype_row_bytes(DType::Q4_K, n_in),
                       .data = wq.data()};
  std::vector<float> y1(static_cast<size_t>(n_out * n_rows)), y2 = y1;
  QuantizedActivations scratch;
  ThreadPool one(1), two(2);
  matmul_f32(m, 0, x.data(), n_rows, y1.data(), scratch, one);
  matmul_f32(m, 0, x.data(), n_rows, y2.data(), scratch, two);
  EXPECT_EQ(y1, y2);
}

}  // namespace
}  // namespace moetier::cpu
