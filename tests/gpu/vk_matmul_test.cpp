// GPU activation conversion and matmuls against the CPU (tier 2: op on GPU vs CPU).
//
// Tolerances, derived: the GPU quantizes activations with the CPU's formulas (same int8
// codes and scales: compared byte for byte) and computes each block's integer inner product
// exactly, turns it into a float with the CPU scalar reference's expression and adds the
// blocks in order, so quantized matmuls must be bit-identical to cpu::dot scalar references.
// Float weights sum in float-float on the GPU (error ≤ ~2^-44 relative) where the CPU sums in
// double, so the rounded results may differ only at a rounding tie: ≤ 1 ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "core/thread_pool.h"
#include "cpu/dot.h"
#include "cpu/matmul.h"
#include "gpu/vulkan/vk_ops.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

using testing::random_normal;

std::vector<uint8_t> quantize_matrix(DType type, const std::vector<float>& values, int64_t n_in, int64_t rows) {
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes * rows));
  for (int64_t r = 0; r < rows; ++r) {
    type_ops(type)->quantize_row(values.data() + r * n_in, out.data() + r * row_bytes, n_in);
  }
  return out;
}

float ulp(float x) { return std::nextafter(std::fabs(x), INFINITY) - std::fabs(x); }

class GpuMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(GpuMatmul, QuantizedActivationsAndProductsEqualTheCpu) {
  GPU_OR_SKIP(dev);
  const DType type = GetParam();
  const int64_t n_in = 512, n_out = 77, n_tok = 3;
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  const auto weights = quantize_matrix(type, random_normal(static_cast<size_t>(n_in * n_out), 1, 0.05f), n_in, n_out);
  auto x = random_normal(static_cast<size_t>(n_in * n_tok), 2);
  x[3] = -4.0f;  // a tie
  x[7] = 4.0f;   // for the largest magnitude: the first one sets the sign
  const DType act = *cpu::activation_type_for(type);

  // CPU reference: activations as the CPU converts them, products by the scalar kernel.
  ThreadPool pool(1);
  cpu::QuantizedActivations qa;
  cpu::quantize_activations(act, x.data(), n_tok, n_in, qa, pool);
  const cpu::DotKernel* k = cpu::scalar_dot_kernel(type);
  std::vector<float> expected(static_cast<size_t>(n_tok * n_out));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < n_out; ++o) expected[t * n_out + o] = k->fn(n_in, weights.data() + o * row_bytes, qa.row(t));
  }

  auto gw = vk::upload_matrix(*dev, type, n_in, n_out, 1, row_bytes, weights.data());
  ASSERT_TRUE(gw.is_ok()) << gw.status().message();
  auto gx = dev->create_buffer(x.data(), x.size() * 4, vk::MemoryUse::kScratch);
  const uint64_t xq_stride = vk::gpu_activation_row_bytes(act, n_in);
  auto gq = dev->allocator().allocate(xq_stride * n_tok, vk::MemoryUse::kScratch);
  auto gy = dev->allocator().allocate(expected.size() * 4, vk::MemoryUse::kScratch);
  ASSERT_TRUE(gx.is_ok() && gq.is_ok() && gy.is_ok());
  ASSERT_TRUE(vk::quantize_rows(*dev, act, *gx, n_tok, n_in, n_in, *gq).is_ok());
  ASSERT_TRUE(vk::matmul_exact(*dev, {.w = &*gw, .xq = *gq, .x_row_bytes = xq_stride, .n_tok = n_tok, .y = *gy,
                                      .y_stride = n_out}).is_ok());
  std::vector<uint8_t> got_q(xq_stride * n_tok);
  std::vector<float> got(expected.size());
  ASSERT_TRUE(dev->download(*gq, got_q.data(), got_q.size()).is_ok());
  ASSERT_TRUE(dev->download(*gy, got.data(), got.size() * 4).is_ok());

  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* g = got_q.data() + t * xq_stride;
    const uint8_t* c = qa.row(t);
    size_t first = 0;
    while (first < static_cast<size_t>(qa.row_bytes) && g[first] == c[first]) ++first;
    EXPECT_EQ(first, static_cast<size_t>(qa.row_bytes))
        << dtype_name(act) << " activations of token " << t << " differ from byte " << first << " (GPU "
        << int(g[first]) << ", CPU " << int(c[first]) << ")";
  }
  const bool float_weights = type == DType::F32 || type == DType::F16 || type == DType::BF16;
  int mismatches = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (float_weights) {
      EXPECT_LE(std::fabs(got[i] - expected[i]), ulp(expected[i])) << dtype_name(type) << " at " << i;
    } else if (got[i] != expected[i] && ++mismatches < 5) {
      ADD_FAILURE() << dtype_name(type) << " output " << i << ": GPU " << got[i] << " CPU " << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(GpuMatmul, ExpertStackProductsByPair) {
  GPU_OR_SKIP(dev);
  const DType type = GetParam();
  const int64_t n_in = 256, n_out = 40, n_mat = 5, n_rows_x = 3;
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  const auto weights =
      quantize_matrix(type, random_normal(static_cast<size_t>(n_in * n_out * n_mat), 3, 0.05f), n_in, n_out * n_mat);
  const auto x = random_normal(static_cast<size_t>(n_in * n_rows_x), 4);
  const DType act = *cpu::activation_type_for(type);
  ThreadPool pool(1);
  cpu::QuantizedActivations qa;
  cpu::quantize_activations(act, x.data(), n_rows_x, n_in, qa, pool);
  // Pairs (matrix, activation row): repeated and out-of-order ids.
  const std::vector<uint32_t> ids = {4, 0, 4, 2, 1, 3, 0};
  const std::vector<uint32_t> rows = {0, 0, 1, 2, 1, 2, 2};
  const int64_t n_pairs = static_cast<int64_t>(ids.size());
  const cpu::DotKernel* k = cpu::scalar_dot_kernel(type);
  std::vector<float> expected(static_cast<size_t>(n_pairs * n_out));
  for (int64_t z = 0; z < n_pairs; ++z) {
    for (int64_t o = 0; o < n_out; ++o) {
      expected[z * n_out + o] = k->fn(n_in, weights.data() + (ids[z] * n_out + o) * row_bytes, qa.row(rows[z]));
    }
  }
  auto gw = vk::upload_matrix(*dev, type, n_in, n_out, n_mat, row_bytes, weights.data());
  ASSERT_TRUE(gw.is_ok()) << gw.status().message();
  auto gx = dev->create_buffer(x.data(), x.size() * 4, vk::MemoryUse::kScratch);
  const uint64_t xq_stride = vk::gpu_activation_row_bytes(act, n_in);
  auto gq = dev->allocator().allocate(xq_stride * n_rows_x, vk::MemoryUse::kScratch);
  auto gids = dev->create_buffer(ids.data(), ids.size() * 4, vk::MemoryUse::kScratch);
  auto grows = dev->create_buffer(rows.data(), rows.size() * 4, vk::MemoryUse::kScratch);
  auto gy = dev->allocator().allocate(expected.size() * 4, vk::MemoryUse::kScratch);
  ASSERT_TRUE(gx.is_ok() && gq.is_ok() && gids.is_ok() && grows.is_ok() && gy.is_ok());
  ASSERT_TRUE(vk::quantize_rows(*dev, act, *gx, n_rows_x, n_in, n_in, *gq).is_ok());
  ASSERT_TRUE(vk::matmul_id_exact(*dev, {.w = &*gw, .xq = *gq, .x_row_bytes = xq_stride, .ids = *gids, .rows = *grows,
                                         .n_pairs = n_pairs, .y = *gy, .y_stride = n_out}).is_ok());
  std::vector<float> got(expected.size());
  ASSERT_TRUE(dev->download(*gy, got.data(), got.size() * 4).is_ok());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_LE(std::fabs(got[i] - expected[i]), ulp(expected[i])) << dtype_name(type) << " at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, GpuMatmul,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_XS),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GpuDevice, ListsDevicesAndReportsMemory) {
  auto devices = vk::list_devices();
  if (!devices) {
    if (testing::vulkan_required()) FAIL() << devices.status().message();
    GTEST_SKIP() << devices.status().message();
  }
  ASSERT_FALSE(devices->empty());
  for (const auto& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.local_heap_bytes, 0u);
    EXPECT_GE(d.max_storage_buffer_range, 1u << 27) << "Vulkan guarantees at least 128 MiB";
    EXPECT_NE(d.describe().find(d.name), std::string::npos);
  }
  EXPECT_FALSE(vk::Device::open(static_cast<int>(devices->size())).is_ok()) << "an index past the last device";
}

}  // namespace
}  // namespace moetier
#endif
