// The tier plan for the CPU's routed experts (engine/expert_tiers.h): everything in RAM
// when it fits; otherwise the same share of every layer, at least 3 · n_expert_used, from
// --ram-budget or the available memory less the reserve; an error that says what to change
// when not even the minimum fits.
#include <gtest/gtest.h>

#include "engine/expert_tiers.h"

namespace moetier {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = 1ll << 30;

// 8 layers of 256 experts of 2 MiB (a 35B-A3B-like layer), 8 used per token.
ExpertTierQuery query() {
  ExpertTierQuery q{.n_expert_used = 8, .resident_bytes = 1 * kGiB, .working_bytes = 100 * kMiB};
  for (int il = 0; il < 8; ++il) q.layers.push_back({.layer = il, .n_expert = 256, .expert_bytes = 2 * kMiB});
  return q;
}

TEST(ExpertTiers, EverythingInRamWhenItFits) {
  ExpertTierQuery q = query();  // 4 GiB of experts
  q.available_bytes = 16 * kGiB;
  q.total_ram_bytes = 16 * kGiB;
  const ExpertTiers t = plan_expert_tiers(q);
  EXPECT_FALSE(t.stream);
  EXPECT_TRUE(t.error.is_ok());
  EXPECT_EQ(t.experts_in_ram, 8 * 256);
  EXPECT_EQ(t.capacity, std::vector<int>(8, 256));
}

TEST(ExpertTiers, TheSameShareOfEveryLayerFromTheAvailableMemoryLessTheReserve) {
  ExpertTierQuery q = query();
  q.total_ram_bytes = 16 * kGiB;           // reserve: max(1 GiB, 16 GiB / 32) = 1 GiB
  q.available_bytes = 4 * kGiB + 100 * kMiB;  // after reserve, dense, working: 2 GiB for experts
  const ExpertTiers t = plan_expert_tiers(q);
  ASSERT_TRUE(t.stream);
  ASSERT_TRUE(t.error.is_ok()) << t.error.message();
  EXPECT_EQ(t.expert_bytes, 4 * kGiB);
  EXPECT_EQ(t.capacity, std::vector<int>(8, 128));  // half of each layer
  EXPECT_EQ(t.cache_bytes, 2 * kGiB);
  EXPECT_EQ(t.budget_bytes, 3 * kGiB + 100 * kMiB);
  EXPECT_NE(t.summary.find("1024 of 2048 in RAM (50%"), std::string::npos) << t.summary;
  EXPECT_NE(t.summary.find("available memory less a reserve"), std::string::npos) << t.summary;
}

TEST(ExpertTiers, AGivenBudgetHasNoReserveAndMixedLayersKeepTheSameShare) {
  ExpertTierQuery q = query();
  q.layers[3].expert_bytes = 3 * kMiB;  // a layer of a bigger type (UD mixes)
  q.available_bytes = 64 * kGiB;        // ignored: --ram-budget decides
  q.ram_budget_bytes = 1 * kGiB + 100 * kMiB + 1088 * kMiB;  // 1088 MiB for 4.25 GiB of experts
  const ExpertTiers t = plan_expert_tiers(q);
  ASSERT_TRUE(t.stream);
  EXPECT_EQ(t.budget_bytes, q.ram_budget_bytes);
  // 1088 / 4352 = a quarter of every layer.
  EXPECT_EQ(t.capacity, std::vector<int>(8, 64));
  EXPECT_LE(t.cache_bytes, 1088 * kMiB);
  EXPECT_NE(t.summary.find("--ram-budget"), std::string::npos) << t.summary;
}

TEST(ExpertTiers, AtLeastThreeTimesTheExpertsUsedAndAnErrorBelowThat) {
  ExpertTierQuery q = query();
  q.ram_budget_bytes = 1 * kGiB + 100 * kMiB + 8 * 24 * 2 * kMiB;  // exactly the minimum: 24 per layer
  ExpertTiers t = plan_expert_tiers(q);
  ASSERT_TRUE(t.error.is_ok()) << t.error.message();
  EXPECT_EQ(t.capacity, std::vector<int>(8, 24));
  q.ram_budget_bytes -= 1;
  t = plan_expert_tiers(q);
  ASSERT_FALSE(t.error.is_ok());
  EXPECT_EQ(t.error.exit_code(), 2);
  EXPECT_NE(t.error.message().find("need at least 384.0 MiB"), std::string::npos) << t.error.message();
  EXPECT_NE(t.error.message().find("raise --ram-budget"), std::string::npos) << t.error.message();
}

TEST(ExpertTiers, NoCpuExpertsNothingToPlan) {
  ExpertTierQuery q = query();
  q.layers.clear();
  q.ram_budget_bytes = 1;
  const ExpertTiers t = plan_expert_tiers(q);
  EXPECT_FALSE(t.stream);
  EXPECT_TRUE(t.error.is_ok());
}

// The VRAM tier: the same number of slots in every GPU-dense layer with CPU experts, whole
// experts, at most the layer's experts; auto only from a known leftover.
GpuExpertCacheQuery cache_query() {
  GpuExpertCacheQuery q;
  for (int l = 0; l < 4; ++l) q.layers.push_back({.layer = 10 + l, .n_expert = 256, .expert_bytes = 2 * kMiB});
  return q;
}

TEST(GpuExpertCache, SlotsPerLayerFromTheRequestedBytes) {
  GpuExpertCacheQuery q = cache_query();
  q.requested_bytes = 4 * 2 * kMiB * 30 + kMiB;  // 30 per layer, and a remainder
  const GpuExpertCache c = plan_gpu_expert_cache(q);
  EXPECT_EQ(c.layers, (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(c.slots, std::vector<int>(4, 30));
  EXPECT_EQ(c.bytes, 4 * 30 * 2 * kMiB);
  EXPECT_EQ(c.slots_total, 120);
  EXPECT_TRUE(c.on());
  EXPECT_NE(c.summary.find("30 of 256 routed experts per layer in 4 layers"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("--gpu-expert-cache"), std::string::npos) << c.summary;
}

TEST(GpuExpertCache, AutoTakesWhatIsLeftAndNeverMoreThanEveryExpert) {
  GpuExpertCacheQuery q = cache_query();
  q.available_bytes = 4 * 2 * kMiB * 7;
  EXPECT_EQ(plan_gpu_expert_cache(q).slots, std::vector<int>(4, 7));
  q.available_bytes = 100 * kGiB;
  EXPECT_EQ(plan_gpu_expert_cache(q).slots, std::vector<int>(4, 256));
  q.available_bytes = -1;  // unknown: none, and nothing to say
  GpuExpertCache c = plan_gpu_expert_cache(q);
  EXPECT_FALSE(c.on());
  EXPECT_TRUE(c.summary.empty());
  q.available_bytes = 4 * 2 * kMiB - 1;  // less than one slot per layer
  c = plan_gpu_expert_cache(q);
  EXPECT_FALSE(c.on());
  EXPECT_TRUE(c.summary.empty());
}

TEST(GpuExpertCache, OffOrNothingToCacheIsSaid) {
  GpuExpertCacheQuery q = cache_query();
  q.requested_bytes = 0;
  q.available_bytes = 100 * kGiB;
  EXPECT_FALSE(plan_gpu_expert_cache(q).on());
  q.requested_bytes = kMiB;  // asked, but below one expert per layer
  GpuExpertCache c = plan_gpu_expert_cache(q);
  EXPECT_FALSE(c.on());
  EXPECT_NE(c.summary.find("less than one expert per layer"), std::string::npos) << c.summary;
  q.layers.clear();  // asked, but every layer's experts are on the GPU (or the CPU computes the layer)
  q.requested_bytes = kGiB;
  c = plan_gpu_expert_cache(q);
  EXPECT_FALSE(c.on());
  EXPECT_NE(c.summary.find("no layer has its dense part on the GPU"), std::string::npos) << c.summary;
}

}  // namespace
}  // namespace moetier
