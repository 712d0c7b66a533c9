#include "cpu/isa.h"

namespace moetier::cpu {

namespace {

// Every fallback is a lower tier, so build_for_tier ends at kScalar.
constexpr bool fallbacks_descend() {
  for (int t = 1; t < kIsaTierCount; ++t) {
    if (static_cast<int>(isa_tier_fallback(static_cast<IsaTier>(t))) >= t) return false;
  }
  return true;
}
static_assert(fallbacks_descend());

}  // namespace

bool isa_tier_runs_on(IsaTier tier, const CpuFeatures& c) {
  switch (tier) {
#define MOETIER_ISA_TIER_RUNS_ON(suffix, Enum, fallback, requirement) \
  case IsaTier::Enum: return requirement;
    MOETIER_ISA_TIERS(MOETIER_ISA_TIER_RUNS_ON)
#undef MOETIER_ISA_TIER_RUNS_ON
  }
  return false;
}

IsaTier isa_tier(const CpuFeatures& cpu) {
  for (int t = kIsaTierCount - 1; t > 0; --t) {
    if (isa_tier_runs_on(static_cast<IsaTier>(t), cpu)) return static_cast<IsaTier>(t);
  }
  return IsaTier::kScalar;
}

IsaTier cpu_isa_tier() {
  static const IsaTier tier = isa_tier(cpu_features());  // read-only, like the CPU's features
  return tier;
}

}  // namespace moetier::cpu
