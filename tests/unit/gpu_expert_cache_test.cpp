// The VRAM expert cache's policy (gpu/expert_cache.h): free slots first, then the least
// recently used slot the step did not read; at most max_uploads per step; copies stop (but
// for a probe every kProbeSteps steps) once the measured hits per copy do not pay for the link.
#include <gtest/gtest.h>

#include <vector>

#include "gpu/expert_cache.h"

namespace moetier {
namespace {

constexpr ExpertCacheCosts kCheapLink{.upload_seconds = 1e-4, .cpu_seconds_per_pair = 1e-4};

std::vector<int> experts_of(std::span<const GpuExpertCachePolicy::Upload> uploads) {
  std::vector<int> v;
  for (const auto& u : uploads) v.push_back(u.expert);
  return v;
}

TEST(GpuExpertCachePolicy, FillsFreeSlotsThenEvictsTheLeastRecentlyUsedNotReadThisStep) {
  GpuExpertCachePolicy p(16, 3);
  p.begin_step();
  const std::vector<int> first = {5, 9, 2};
  EXPECT_EQ(experts_of(p.plan_uploads(first, 2, kCheapLink)), (std::vector<int>{5, 9}));  // capped at 2
  EXPECT_EQ(p.slot_of(5), 0);
  EXPECT_EQ(p.slot_of(9), 1);
  EXPECT_EQ(p.slot_of(2), -1);
  p.begin_step();
  const std::vector<int> second = {2};
  EXPECT_EQ(experts_of(p.plan_uploads(second, 2, kCheapLink)), std::vector<int>{2});
  EXPECT_EQ(p.slot_of(2), 2);
  // Step 3 reads 9 and 2; 5 (unused since step 1) is the one replaced.
  p.begin_step();
  p.hit(9);
  p.hit(2);
  const std::vector<int> third = {7};
  const auto up = p.plan_uploads(third, 2, kCheapLink);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].slot, 0);
  EXPECT_EQ(p.slot_of(7), 0);
  EXPECT_EQ(p.slot_of(5), -1);
  EXPECT_EQ(p.expert_in(0), 7);
  EXPECT_EQ(p.hits_per_upload(), 0.0) << "5 was never hit before it went";
}

TEST(GpuExpertCachePolicy, SlotsReadThisStepAreNeverReplacedByItsCopies) {
  GpuExpertCachePolicy p(8, 2);
  p.begin_step();
  const std::vector<int> a = {0, 1};
  p.plan_uploads(a, 2, kCheapLink);
  p.begin_step();
  p.hit(0);
  p.hit(1);
  const std::vector<int> b = {2, 3};
  EXPECT_TRUE(p.plan_uploads(b, 2, kCheapLink).empty()) << "every slot was read by this step";
}

TEST(GpuExpertCachePolicy, CopiesStopWhenTheyDoNotPayButAProbeKeepsMeasuring) {
  GpuExpertCachePolicy p(128, 2);
  // A slow link: a copy costs as much as 10 pairs on the CPU; copies are hit once each.
  const ExpertCacheCosts slow{.upload_seconds = 1e-3, .cpu_seconds_per_pair = 1e-4};
  int expert = 0;
  for (int round = 0; round < 2; ++round) {  // fill, then the first evictions measure
    p.begin_step();  // a step that reads every copy once
    for (int s = 0; s < p.n_slots(); ++s) {
      if (p.expert_in(s) >= 0) p.hit(p.expert_in(s));
    }
    p.begin_step();  // and one that misses two others
    const std::vector<int> missed = {expert, expert + 1};
    expert += 2;
    EXPECT_EQ(p.plan_uploads(missed, 2, slow).size(), 2u) << "round " << round << ": not measured yet, or paying";
    if (round == 1) {
      EXPECT_EQ(p.hits_per_upload(), 1.0);
    }
  }
  EXPECT_FALSE(p.uploads_pay(slow));
  EXPECT_TRUE(p.uploads_pay(kCheapLink));
  // Not paying: nothing for kProbeSteps − 1 steps after the last copy, then one probe.
  int copies = 0, steps_to_probe = 0;
  for (int step = 1; step <= GpuExpertCachePolicy::kProbeSteps; ++step) {
    p.begin_step();
    const std::vector<int> missed = {expert, expert + 1};
    expert += 2;
    const auto up = p.plan_uploads(missed, 2, slow);
    copies += static_cast<int>(up.size());
    if (!up.empty() && steps_to_probe == 0) steps_to_probe = step;
  }
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(steps_to_probe, GpuExpertCachePolicy::kProbeSteps);
}

TEST(GpuExpertCachePolicy, ExpertsAlreadyCopiedAreNotCopiedAgain) {
  GpuExpertCachePolicy p(8, 4);
  p.begin_step();
  const std::vector<int> a = {3, 3, 4};
  EXPECT_EQ(experts_of(p.plan_uploads(a, 4, kCheapLink)), (std::vector<int>{3, 4}));
}

}  // namespace
}  // namespace moetier
