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

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
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
          << dtype_name(wt) << " n=" << n << " tier=" << isa_tier_name(best->tier);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DotKernels,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_XS),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// AVX2 kernels against their scalar references, on random rows and on extreme codes.
//
// The AVX2 kernels form the same exact integer sum per block as the scalar ones (the
// maddubs/madd ranges are argued in each kernel's header) and then do the scalar float
// expression per block, in block order, without FMA contraction, so they must be
// bit-identical to the reference: that is checked first. The documented contract that a
// future reordering of the float work must still meet is the bound
// |avx2 − scalar| ≤ 4·n_blocks·u·S, u = 2^-24, S = Σ_i |w_i·a_i| over the dequantized
// elements (S bounds Σ|partial| at every level): the scalar kernel does ≤ 3 roundings per
// block term plus n_blocks − 1 sequential additions, error ≤ (n_blocks + 3)·u·S to first
// order; a variant accumulating FMAs in 8 lanes and summing them with a 3-level tree has
// ≤ (n_blocks/8 + 5)·u·S; the difference ≤ (9/8·n_blocks + 8)·u·S ≤ 4·n_blocks·u·S once
// n_blocks ≥ 3 (every Q8_0 shape below has n_blocks ≥ 8; for K-quants, with one block,
// only bit-identity is meaningful, which is what we get).
struct Avx2Case {
  DType weight_type;
  VecDotFn avx2;
};

double abs_term_sum(DType wt, DType at, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a, int64_t n) {
  std::vector<float> wv(static_cast<size_t>(n)), av(static_cast<size_t>(n));
  type_ops(wt)->dequantize_row(w.data(), wv.data(), n);
  type_ops(at)->dequantize_row(a.data(), av.data(), n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(double{wv[i]} * av[i]);
  return s;
}

void expect_avx2_matches_scalar(const Avx2Case& c, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a,
                                int64_t n, const char* what) {
  const DotKernel* scalar = scalar_dot_kernel(c.weight_type);
  const int64_t n_blocks = n / dtype_traits(c.weight_type).block_elems;
  const double bound =
      4.0 * static_cast<double>(n_blocks) * std::ldexp(1.0, -24) *
      abs_term_sum(c.weight_type, scalar->activation_type, w, a, n);
  const float ref = scalar->fn(n, w.data(), a.data());
  const float got = c.avx2(n, w.data(), a.data());
  EXPECT_EQ(got, ref) << dtype_name(c.weight_type) << " n=" << n << " " << what << " (not bit-identical)";
  EXPECT_LE(std::fabs(double{got} - ref), bound) << dtype_name(c.weight_type) << " n=" << n << " " << what
                                                 << " scalar=" << ref << " avx2=" << got;
}

TEST(DotKernelsAvx2, MatchScalarOnRandomAndExtremeRows) {
  const CpuFeatures cpu = cpu_features();
  if (!(cpu.avx2 && cpu.fma)) GTEST_SKIP() << "CPU lacks AVX2+FMA";
  const Avx2Case cases[] = {{DType::Q4_K, dot::q4_k_q8_k_avx2},
                            {DType::Q6_K, dot::q6_k_q8_k_avx2},
                            {DType::Q8_0, dot::q8_0_q8_0_avx2}};
  std::mt19937 rng(7);
  for (const Avx2Case& c : cases) {
    const DType at = scalar_dot_kernel(c.weight_type)->activation_type;
    // The AVX2 table serves this family (best_dot_kernel may prefer AVX-512 here).
    const auto table = dot_kernels(IsaTier::kAvx2);
    EXPECT_TRUE(std::any_of(table.begin(), table.end(), [&](const DotKernel& k) { return k.fn == c.avx2; }))
        << dtype_name(c.weight_type);
    // 2816 = 11 super-blocks (odd), 11264 = 44; for Q8_0 also 96 and 2080 (3 and 65 blocks:
    // not a multiple of the kernel's 4-block step, so its tail loop runs).
    std::vector<int64_t> shapes = {256, 512, 2816, 4096, 11264};
    if (c.weight_type == DType::Q8_0) shapes.insert(shapes.end(), {96, 2080});
    for (int64_t n : shapes) {
      const size_t wbytes = static_cast<size_t>(dtype_row_bytes(c.weight_type, n));
      const size_t abytes = static_cast<size_t>(dtype_row_bytes(at, n));
      std::vector<uint8_t> w(wbytes), a(abytes);
      // Random bytes are valid weight rows (every bit pattern decodes) once the fp16 scales
      // are finite; quantize real activations so Q8_K's bsums are consistent.
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
      for (auto& v : wf) v = gauss(rng) * 0.05f;
      for (auto& v : af) v = gauss(rng);
      type_ops(c.weight_type)->quantize_row(wf.data(), w.data(), n);
      QuantizedActivations q;
      ThreadPool pool(1);
      quantize_activations(at, af.data(), 1, n, q, pool);
      std::copy(q.bytes.begin(), q.bytes.begin() + static_cast<int64_t>(abytes), a.begin());
      expect_avx2_matches_scalar(c, w, a, n, "random");

      // Extreme rows: weights from ±max inputs (largest codes/scales); activations of ±max
      // magnitude (codes ±127) with alternating and equal signs; all zeros.
      for (auto& v : wf) v = 1.0f;
      type_ops(c.weight_type)->quantize_row(wf.data(), w.data(), n);
      for (int64_t i = 0; i < n; ++i) af[static_cast<size_t>(i)] = (i % 3 == 0) ? -1.0f : 1.0f;
      quantize_activations(at, af.data(), 1, n, q, pool);
      std::copy(q.bytes.begin(), q.bytes.begin() + static_cast<int64_t>(abytes), a.begin());
      expect_avx2_matches_scalar(c, w, a, n, "max codes, ±127");
      for (auto& v : af) v = -1.0f;
      quantize_activations(at, af.data(), 1, n, q, pool);
      std::copy(q.bytes.begin(), q.bytes.begin() + static_cast<int64_t>(abytes), a.begin());
      expect_avx2_matches_scalar(c, w, a, n, "max codes, all -127");
      for (int64_t i = 0; i < n; ++i) wf[static_cast<size_t>(i)] = (i % 2) ? -1.0f : 1.0f;
      type_ops(c.weight_type)->quantize_row(wf.data(), w.data(), n);
      expect_avx2_matches_scalar(c, w, a, n, "±max weights");
      std::fill(af.begin(), af.end(), 0.0f);
      quantize_activations(at, af.data(), 1, n, q, pool);
      std::copy(q.bytes.begin(), q.bytes.begin() + static_cast<int64_t>(abytes), a.begin());
      EXPECT_EQ(c.avx2(n, w.data(), a.data()), 0.0f) << dtype_name(c.weight_type) << " zero activations";
    }
  }
}

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

// Interleaved rows (the loader's repack of dense matrices) give the file layout's products bit
// for bit, for one token (the x8 decode kernel), a few (a speculative verify), from 64 on (VNNI kernels decode the
// whole group first) and past one of matmul_interleaved's 256-token chunks, on 1 and 2
// threads; every interleavable type.
TEST(Matmul, InterleavedRowsEqualTheFilesRows) {
  const DotKernel* probe = best_dot_kernel(DType::Q4_K, cpu_features());
  if (probe == nullptr || probe->tile_x8 == nullptr) GTEST_SKIP() << "no interleaved kernels on this CPU";
  const int64_t n_in = 512, n_out = 40;
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    const int64_t rb = dtype_row_bytes(type, n_in);
    std::vector<float> w(static_cast<size_t>(n_in * n_out));
    for (auto& v : w) v = gauss(rng);
    std::vector<uint8_t> rows(static_cast<size_t>(rb * n_out));
    for (int64_t r = 0; r < n_out; ++r) type_ops(type)->quantize_row(&w[r * n_in], rows.data() + r * rb, n_in);
    std::vector<uint8_t> groups = rows;
    interleave_in_place(type, n_in, n_out, groups.data(), 1);
    const WeightMatrix plain{.type = type, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .data = rows.data()};
    WeightMatrix x8 = plain;
    x8.data = groups.data();
    x8.layout = RowLayout::kInterleaved8;
    for (int64_t n_tokens : {1, 2, 3, 4, 5, 8, 130, 300}) {
      std::vector<float> x(static_cast<size_t>(n_in * n_tokens));
      for (auto& v : x) v = gauss(rng);
      std::vector<float> want(static_cast<size_t>(n_out * n_tokens)), got1(want.size(), -1.0f), got2(want.size(), -2.0f);
      QuantizedActivations scratch;
      ThreadPool one(1), two(2);
      matmul_f32(plain, 0, x.data(), n_tokens, want.data(), scratch, one);
      matmul_f32(x8, 0, x.data(), n_tokens, got1.data(), scratch, one);
      matmul_f32(x8, 0, x.data(), n_tokens, got2.data(), scratch, two);
      EXPECT_EQ(0, std::memcmp(want.data(), got1.data(), want.size() * sizeof(float))) << dtype_name(type) << " " << n_tokens;
      EXPECT_EQ(0, std::memcmp(want.data(), got2.data(), want.size() * sizeof(float))) << dtype_name(type) << " " << n_tokens;
    }
  }
}

}  // namespace
}  // namespace moetier::cpu
