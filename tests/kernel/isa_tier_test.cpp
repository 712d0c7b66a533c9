// The ISA tiers (cpu/isa.h) and the dispatch of every kernel family over them: for every
// combination of the CPU features the tiers read, the tier chosen and the build each family
// uses for it are the ones the selection rules give (the highest tier the CPU runs; a family
// without a build for it uses the fallback's: AVX-512 CPUs need not have AVX-VNNI), and the
// --cpu-isa caps select the tiers they name.
#include "cpu/isa.h"

#include <gtest/gtest.h>

#include <string>

#include "core/cpu_features.h"
#include "cpu/delta_rule.h"
#include "cpu/dot.h"
#include "cpu/flash_attention.h"
#include "cpu/silu.h"
#include "tensor/dtype.h"

namespace moetier::cpu {
namespace {

// Feature set number `bits` over the flags the tiers read.
CpuFeatures features(unsigned bits) {
  CpuFeatures c;
  bool* flags[] = {&c.avx2, &c.fma, &c.f16c, &c.avx512f, &c.avx512bw, &c.avx512vl, &c.avx512vnni, &c.avxvnni};
  for (size_t i = 0; i < std::size(flags); ++i) *flags[i] = (bits >> i) & 1;
  return c;
}
constexpr unsigned kFeatureSets = 1u << 8;

// The selection written out: AVX-512 (F/BW/VL/VNNI + the AVX2 set) first, then AVX2 + AVX-VNNI,
// then AVX2 + FMA + F16C, then scalar.
IsaTier expected_tier(const CpuFeatures& c) {
  const bool avx2 = c.avx2 && c.fma && c.f16c;
  if (avx2 && c.avx512f && c.avx512bw && c.avx512vl && c.avx512vnni) return IsaTier::kAvx512;
  if (avx2 && c.avxvnni) return IsaTier::kAvxVnni;
  if (avx2) return IsaTier::kAvx2;
  return IsaTier::kScalar;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

TEST(IsaTier, NamesAndFallbacks) {
  EXPECT_EQ(isa_tier_name(IsaTier::kScalar), "scalar");
  EXPECT_EQ(isa_tier_name(IsaTier::kAvx2), "avx2");
  EXPECT_EQ(isa_tier_name(IsaTier::kAvxVnni), "avxvnni");
  EXPECT_EQ(isa_tier_name(IsaTier::kAvx512), "avx512");
  EXPECT_EQ(isa_tier_fallback(IsaTier::kScalar), IsaTier::kScalar);
  EXPECT_EQ(isa_tier_fallback(IsaTier::kAvx2), IsaTier::kScalar);
  EXPECT_EQ(isa_tier_fallback(IsaTier::kAvxVnni), IsaTier::kAvx2);
  EXPECT_EQ(isa_tier_fallback(IsaTier::kAvx512), IsaTier::kAvx2);
}
static_assert(isa_tier_named("avxvnni") == IsaTier::kAvxVnni);
static_assert(kIsaTierCount == 4 && kIsaTiers[3] == IsaTier::kAvx512);

TEST(IsaTier, ChosenTierFollowsTheFeatures) {
  for (unsigned bits = 0; bits < kFeatureSets; ++bits) {
    const CpuFeatures c = features(bits);
    const IsaTier want = expected_tier(c);
    EXPECT_EQ(isa_tier(c), want) << c.describe();
    // The chosen tier, its fallbacks and scalar run on the CPU.
    for (IsaTier t = want;; t = isa_tier_fallback(t)) {
      EXPECT_TRUE(isa_tier_runs_on(t, c)) << c.describe() << " " << isa_tier_name(t);
      if (t == IsaTier::kScalar) break;
    }
  }
}

TEST(IsaTier, EveryFamilyUsesItsBuildOrTheFallbacks) {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q8_0,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  for (unsigned bits = 0; bits < kFeatureSets; ++bits) {
    const CpuFeatures c = features(bits);
    const IsaTier tier = expected_tier(c);
    for (DType t : types) {
      // AVX-VNNI has integer kernels only: AVX2's float kernels serve it.
      const IsaTier want = tier == IsaTier::kAvxVnni && is_float(t) ? IsaTier::kAvx2 : tier;
      const DotKernel* k = best_dot_kernel(t, c);
      ASSERT_NE(k, nullptr) << dtype_name(t);
      EXPECT_EQ(k->tier, want) << c.describe() << " " << dtype_name(t);
      EXPECT_EQ(k->weight_type, t);
      EXPECT_EQ(k, dot_kernel(t, tier));
    }
    EXPECT_EQ(flash_kernels(c).tier, tier) << c.describe();
    // The delta rule and SiLU have no AVX-VNNI build: AVX2's serves it.
    EXPECT_EQ(delta_rule_kernels(tier).tier, tier == IsaTier::kAvxVnni ? IsaTier::kAvx2 : tier) << c.describe();
    EXPECT_EQ(silu_kernels(tier).tier, tier == IsaTier::kAvxVnni ? IsaTier::kAvx2 : tier) << c.describe();
  }
  EXPECT_EQ(best_dot_kernel(DType::Q2_K, cpu_features()), nullptr);
  EXPECT_EQ(scalar_dot_kernel(DType::Q2_K), nullptr);
}

// Every tier's table holds each family at most once and only its own kernels; scalar holds
// every family.
TEST(IsaTier, TablesHoldTheirTiersKernels) {
  for (IsaTier t : kIsaTiers) {
    for (const DotKernel& k : dot_kernels(t)) {
      EXPECT_EQ(k.tier, t);
      EXPECT_EQ(*activation_type_for(k.weight_type), k.activation_type) << dtype_name(k.weight_type);
      int same = 0;
      for (const DotKernel& other : dot_kernels(t)) same += other.weight_type == k.weight_type;
      EXPECT_EQ(same, 1) << isa_tier_name(t) << " " << dtype_name(k.weight_type);
    }
  }
  EXPECT_EQ(dot_kernels(IsaTier::kScalar).size(), 9u);
  for (const DotKernel& k : dot_kernels(IsaTier::kScalar)) {
    EXPECT_EQ(k.multi, nullptr);
    EXPECT_EQ(k.tile, nullptr);
    EXPECT_EQ(k.tile_x8, nullptr);
  }
}

// The --cpu-isa caps (core/cpu_features.cpp) applied to this CPU's features give the tier
// they name, where the CPU has it: "avx2" keeps AVX-VNNI, "avx2-novnni" drops it.
TEST(IsaTier, CpuIsaCapsSelectTheirTier) {
  const CpuFeatures& have = cpu_features();
  if (!have.isa_limit.empty()) GTEST_SKIP() << "features already capped";
  CpuFeatures avx2 = have;
  avx2.avx512f = avx2.avx512bw = avx2.avx512vl = avx2.avx512vnni = avx2.avx512bf16 = false;
  CpuFeatures novnni = avx2;
  novnni.avxvnni = false;
  CpuFeatures scalar = novnni;
  scalar.avx2 = scalar.fma = scalar.f16c = false;
  EXPECT_EQ(isa_tier(scalar), IsaTier::kScalar);
  if (have.has_avx2_set()) {
    EXPECT_EQ(isa_tier(novnni), IsaTier::kAvx2);
    EXPECT_EQ(isa_tier(avx2), have.avxvnni ? IsaTier::kAvxVnni : IsaTier::kAvx2);
  }
  if (have.has_avx512_set()) {
    EXPECT_EQ(isa_tier(have), IsaTier::kAvx512);
  }
  EXPECT_EQ(cpu_isa_tier(), isa_tier(have));
}

}  // namespace
}  // namespace moetier::cpu
