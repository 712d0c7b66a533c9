// Subgroup emulation (MOETIER_VK_SUBGROUP, gpu/vulkan/vk_context.h): the parsing of the
// setting, the emulated device's facts and vendor row, and kernels whose results do not
// depend on the subgroup width (the router: bit for bit) run at every width in one process
// (the fixture parameter). The whole GPU suite runs again under MOETIER_VK_SUBGROUP=32 and
// =64 as separate ctest entries (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_shaders.h"
#include "gpu/vulkan/vk_stream.h"
#include "gpu/vulkan/vk_tuning.h"

namespace moetier {
namespace {

TEST(SubgroupEmulation, ParsesWidthAndVendor) {
  struct Want {
    const char* text;
    uint32_t width, vendor;
  };
  for (const Want& w : {Want{"", 0, 0}, Want{"32", 32, vk::kVendorNvidia}, Want{"64", 64, vk::kVendorAmd},
                        Want{"32:intel", 32, vk::kVendorIntel}, Want{"64:nvidia", 64, vk::kVendorNvidia},
                        Want{"32:amd", 32, vk::kVendorAmd}}) {
    auto e = vk::parse_subgroup_emulation(w.text);
    ASSERT_TRUE(e.is_ok()) << w.text << ": " << e.status().message();
    EXPECT_EQ(e->width, w.width) << w.text;
    EXPECT_EQ(e->vendor_id, w.vendor) << w.text;
  }
  for (const char* bad : {"16", "8", "128", "32:arm", "32:", "wide", "64 "}) {
    auto e = vk::parse_subgroup_emulation(bad);
    ASSERT_FALSE(e.is_ok()) << bad;
    EXPECT_NE(e.status().message().find("32 or 64"), std::string::npos) << e.status().message();
  }
}

// Every vendor named in the table has a row, lavapipe's is the loop-limited driver's, and
// an unknown hardware vendor takes the fallback.
TEST(SubgroupEmulation, VendorRowsAreChosenByVendor) {
  vk::DeviceInfo info;
  for (const auto& [id, name] : {std::pair{vk::kVendorNvidia, "NVIDIA"}, std::pair{vk::kVendorAmd, "AMD"},
                                 std::pair{vk::kVendorIntel, "Intel"}}) {
    info.vendor_id = id;
    EXPECT_STREQ(vk::vendor_defaults(info).vendor, name);
  }
  info.vendor_id = 0x10005;
  info.loop_limited = true;
  EXPECT_STREQ(vk::vendor_defaults(info).vendor, "lavapipe");
  info.loop_limited = false;
  EXPECT_STREQ(vk::vendor_defaults(info).vendor, "other");
  const std::string table = vk::describe_vendor_defaults(info);
  for (const auto& row : vk::vendor_defaults_table()) EXPECT_NE(table.find(row.vendor), std::string::npos) << table;
  EXPECT_NE(table.find("* other"), std::string::npos) << table;
}

// Every shader with native subgroup operations has both emulated variants, and they have
// none (else an emulated run would fail to create its pipeline, or silently use the device's
// own width); the native shaders of the fast kernels do use them.
TEST(SubgroupEmulation, EveryShaderWithSubgroupOperationsHasEmulatedVariants) {
  std::map<std::string, bool> uses;  // shader → declares a GroupNonUniform capability
  for (const auto& b : vk::shader_binaries()) {
    auto access = vk::reflect_bindings(b.words);
    ASSERT_TRUE(access.is_ok()) << b.name << ": " << access.status().message();
    uses[std::string(b.name)] = access->subgroup_ops;
  }
  int native = 0;
  for (const auto& [name, subgroup_ops] : uses) {
    if (!subgroup_ops) continue;
    ++native;
    for (const char* width : {"32", "64"}) {
      const auto it = uses.find(name + "_sg" + width);
      ASSERT_NE(it, uses.end()) << name << " has no _sg" << width << " variant";
      EXPECT_FALSE(it->second) << it->first << " still uses native subgroup operations";
    }
  }
  for (const char* name : {"matvec_q4_k", "matvec_id_swiglu_iq4_xs", "flash_attention", "flash_attention_split",
                           "delta_rule_fast", "delta_rule_fast_norm", "moe_router_fast"}) {
    EXPECT_TRUE(uses[name]) << name;
  }
  EXPECT_GE(native, 41);  // 9 weight types × 4 mat-vecs, 2 flash attentions, 2 delta rules, the router
}

struct EmulationCase {
  std::string name;
  vk::SubgroupEmulation emulation;  // width 0: the device's own subgroups
  const char* vendor;               // the row the device takes (nullptr: whatever the device's is)
  uint32_t min_size = 0;            // the smallest subgroup the emulated device reports
};

class GpuSubgroupEmulation : public ::testing::TestWithParam<EmulationCase> {};

// The emulated device reports the emulated width everywhere the kernels look, keeps its
// native facts, and takes the emulated vendor's row.
TEST_P(GpuSubgroupEmulation, DeviceReportsTheEmulatedWidth) {
  const EmulationCase& c = GetParam();
  std::string why;
  auto dev = testing::open_test_gpu(why, c.emulation);
  if (!dev) {
    if (testing::vulkan_required()) FAIL() << "no Vulkan device: " << why;
    GTEST_SKIP() << "no Vulkan device: " << why;
  }
  const vk::DeviceInfo& info = dev->info();
  EXPECT_EQ(info.emulated_subgroup, c.emulation.width);
  if (c.emulation.width == 0) {
    EXPECT_EQ(info.subgroup_size, info.native_subgroup_size);
    return;
  }
  EXPECT_EQ(info.subgroup_size, c.emulation.width);
  EXPECT_EQ(info.min_subgroup_size, c.min_size);
  EXPECT_EQ(info.max_subgroup_size, c.emulation.width);
  EXPECT_FALSE(info.subgroup_size_control);
  EXPECT_FALSE(info.full_subgroups);
  EXPECT_GT(info.native_subgroup_size, 0u);
  EXPECT_EQ(info.vendor_id, c.emulation.vendor_id);
  EXPECT_STREQ(vk::vendor_defaults(info).vendor, c.vendor);
  const std::string details = vk::describe_device_details(info);
  EXPECT_NE(details.find(fmt::format("emulated {} wide", c.emulation.width)), std::string::npos) << details;
  // 16 lanes per query (head dim 256's default) fit an emulated subgroup, whatever the native
  // width; not where the device may compile 8-wide subgroups (Intel).
  EXPECT_EQ(vk::flash_attention_scratch_bytes(info, 1, 16, 2, 4096, 256, {.lanes = 16}).is_ok(), c.min_size >= 16);
  EXPECT_EQ(vk::flash_attention_scratch_bytes(info, 1, 16, 2, 4096, 256, {.lanes = c.emulation.width}).is_ok(),
            c.min_size == c.emulation.width);
}

// The fast router against the exact one, bit for bit, with ties, at 8 to 512 experts: its
// workgroup of 64 is 8 subgroups natively on lavapipe, 2 at width 32, 1 at width 64.
TEST_P(GpuSubgroupEmulation, FastRouterEqualsTheExactRouter) {
  const EmulationCase& c = GetParam();
  std::string why;
  auto dev = testing::open_test_gpu(why, c.emulation);
  if (!dev) {
    if (testing::vulkan_required()) FAIL() << "no Vulkan device: " << why;
    GTEST_SKIP() << "no Vulkan device: " << why;
  }
  for (const int64_t n_expert : {8, 128, 512}) {
    const int64_t k = std::min<int64_t>(8, n_expert / 2), rows = 4;
    auto logits = testing::random_normal(static_cast<size_t>(rows * n_expert), 60 + static_cast<uint64_t>(n_expert), 2.0f);
    logits[3] = logits[n_expert - 1] = logits[n_expert / 2] = 20.0f;  // a three-way tie in row 0
    std::vector<std::vector<float>> got_p, got_w;
    std::vector<std::vector<uint32_t>> got_ids;
    for (const auto ks : {vk::KernelSet::kExact, vk::KernelSet::kFast}) {
      auto gl = *dev->create_buffer(logits.data(), logits.size() * 4, vk::MemoryUse::kScratch);
      const size_t n = static_cast<size_t>(rows * k);
      auto gids = *dev->create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch);
      auto gw = *dev->create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch);
      auto grows = *dev->create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch);
      const Status st = vk::moe_router(*dev, ks, gl, n_expert, k, rows, gids, gw, grows);
      ASSERT_TRUE(st.is_ok()) << st.message();
      std::vector<float> p(logits.size()), w(n);
      std::vector<uint32_t> ids(n);
      ASSERT_TRUE(dev->download(gl, p.data(), p.size() * 4).is_ok());
      ASSERT_TRUE(dev->download(gw, w.data(), n * 4).is_ok());
      ASSERT_TRUE(dev->download(gids, ids.data(), n * 4).is_ok());
      got_p.push_back(p);
      got_w.push_back(w);
      got_ids.push_back(ids);
    }
    EXPECT_EQ(got_ids[1], got_ids[0]) << n_expert << " experts";
    EXPECT_EQ(got_w[1], got_w[0]) << n_expert << " experts";
    EXPECT_EQ(got_p[1], got_p[0]) << n_expert << " experts";
    EXPECT_EQ(got_ids[0][0], 3u) << "ties go to the lower id";
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, GpuSubgroupEmulation,
                         ::testing::Values(EmulationCase{"native", {}, nullptr},
                                           EmulationCase{"sg32_nvidia", {.width = 32, .vendor_id = vk::kVendorNvidia}, "NVIDIA", 32},
                                           EmulationCase{"sg64_amd", {.width = 64, .vendor_id = vk::kVendorAmd}, "AMD", 64},
                                           EmulationCase{"sg32_intel", {.width = 32, .vendor_id = vk::kVendorIntel}, "Intel", 8}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace moetier
#endif
