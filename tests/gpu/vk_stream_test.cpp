// The stream's barrier placement and census (vk_stream.h): which bindings a shader writes is
// read from its SPIR-V, and a barrier goes only before work that depends on earlier work.
#include <gtest/gtest.h>

#include <vector>

#include "support/gpu.h"

#if MOETIER_HAVE_VULKAN
#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_shaders.h"
#include "gpu/vulkan/vk_stream.h"

namespace moetier {
namespace {

const vk::ShaderBinary* shader(std::string_view name) {
  for (const auto& b : vk::shader_binaries()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

TEST(GpuStream, BindingAccessComesFromTheShader) {
  // moe_combine: experts, weights, shared, shared gate read; out and residual written; the
  // pair map read.
  const auto* combine = shader("moe_combine");
  ASSERT_NE(combine, nullptr);
  auto a = vk::reflect_bindings(combine->words);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->n_bindings, 7u);
  const bool want[] = {false, false, false, false, true, true, false};
  for (uint32_t i = 0; i < 7; ++i) EXPECT_EQ(a->writes[i], want[i]) << "binding " << i;
  // matvec: weights and activations read, y written (a fused residual add reads it too).
  auto m = vk::reflect_bindings(shader("matvec_q4_k")->words);
  ASSERT_TRUE(m.is_ok());
  EXPECT_FALSE(m->writes[0]);
  EXPECT_FALSE(m->writes[1]);
  EXPECT_TRUE(m->writes[2]);
  // Not SPIR-V: an error, not a crash.
  const uint32_t junk[] = {1, 2, 3, 4, 5, 6};
  EXPECT_FALSE(vk::reflect_bindings(junk).is_ok());
  const uint32_t truncated[] = {0x07230203u, 0, 0, 10, 0, 0xFFFF0047u};
  EXPECT_FALSE(vk::reflect_bindings(truncated).is_ok());
}

// Two adds that read the same buffer and write different ones are independent: no barrier
// between them; an add that reads what they wrote gets one. Results as computed in order.
TEST(GpuStream, BarriersOnlyWhereWorkDependsOnEarlierWork) {
  GPU_OR_SKIP(dev);
  const int64_t n = 64;
  const std::vector<float> ones(n, 1.0f), twos(n, 2.0f);
  auto x1 = *dev->create_buffer(ones.data(), n * 4, vk::MemoryUse::kScratch);
  auto x2 = *dev->create_buffer(ones.data(), n * 4, vk::MemoryUse::kScratch);
  auto y = *dev->create_buffer(twos.data(), n * 4, vk::MemoryUse::kScratch);
  ASSERT_TRUE(dev->stream().finish().is_ok());
  (void)dev->stream().take_census();
  ASSERT_TRUE(vk::add(*dev, {.buffer = x1, .stride = n}, {.buffer = y, .stride = n}, n, 1).is_ok());  // x1 = 3
  ASSERT_TRUE(vk::add(*dev, {.buffer = x2, .stride = n}, {.buffer = y, .stride = n}, n, 1).is_ok());  // x2 = 3
  const GpuCensus independent = dev->stream().take_census();
  EXPECT_EQ(independent.dispatches, 2u);
  EXPECT_EQ(independent.barriers, 1u);  // the one at the start of the command buffer
  ASSERT_TRUE(vk::add(*dev, {.buffer = x1, .stride = n}, {.buffer = x2, .stride = n}, n, 1).is_ok());  // x1 = 6
  ASSERT_TRUE(vk::add(*dev, {.buffer = x2, .stride = n}, {.buffer = y, .stride = n}, n, 1).is_ok());   // x2 = 5 (after the read)
  const GpuCensus dependent = dev->stream().take_census();
  EXPECT_EQ(dependent.barriers, 2u);  // read-after-write, then write-after-read
  std::vector<float> got1(n), got2(n);
  ASSERT_TRUE(dev->download(x1, got1.data(), n * 4).is_ok());
  ASSERT_TRUE(dev->download(x2, got2.data(), n * 4).is_ok());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got1[i], 6.0f);
    EXPECT_EQ(got2[i], 5.0f);
  }
  const GpuCensus rest = dev->stream().take_census();
  EXPECT_GE(rest.submits, 1u);
  EXPECT_GE(rest.syncs, 1u);
  EXPECT_EQ(rest.bytes_down, static_cast<uint64_t>(2 * n * 4));
}

}  // namespace
}  // namespace moetier
#endif
