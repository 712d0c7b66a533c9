// The ISA tiers of the CPU kernels. Every kernel family (dot products, flash attention, the
// delta rule) has a scalar build and builds for some of these tiers, each in its own
// translation unit compiled with the tier's flags (CMakeLists.txt, by file-name suffix), and
// dispatches the same way: the tier of the CPU is chosen once from its features (capped by
// --cpu-isa), and a family serves a tier with its build for it, else with the build of the
// tier's fallback (down to scalar, which every family has).
#pragma once

#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

#include "core/cpu_features.h"

namespace moetier::cpu {

// The tier list, in order of preference (lowest first), one line per tier:
//   X(suffix, Enum, fallback suffix, requirement on the CpuFeatures `c`)
// suffix: the tier's kernel units (*_<suffix>.cpp) and the suffix of its kernels' names;
// fallback: the tier whose builds serve a family that has none for this tier (it must run on
// every CPU this tier runs on: AVX-512 machines need not have AVX-VNNI).
#define MOETIER_ISA_TIERS(X)                                  \
  X(scalar, kScalar, scalar, true)                            \
  X(avx2, kAvx2, scalar, c.has_avx2_set())                    \
  X(avxvnni, kAvxVnni, avx2, c.has_avx2_set() && c.avxvnni)   \
  X(avx512, kAvx512, avx2, c.has_avx512_set())

// "avx2" = AVX2 + FMA + F16C; "avxvnni" = that + AVX-VNNI; "avx512" = AVX-512 F/BW/VL/VNNI +
// the AVX2 set.
enum class IsaTier : uint8_t {
#define MOETIER_ISA_TIER_ENUM(suffix, Enum, fallback, requirement) Enum,
  MOETIER_ISA_TIERS(MOETIER_ISA_TIER_ENUM)
#undef MOETIER_ISA_TIER_ENUM
};

// Every tier, lowest first.
inline constexpr IsaTier kIsaTiers[] = {
#define MOETIER_ISA_TIER_VALUE(suffix, Enum, fallback, requirement) IsaTier::Enum,
    MOETIER_ISA_TIERS(MOETIER_ISA_TIER_VALUE)
#undef MOETIER_ISA_TIER_VALUE
};
inline constexpr int kIsaTierCount = static_cast<int>(std::size(kIsaTiers));

// The tier whose name (its suffix) is `name`; a compile-time error for an unknown name.
consteval IsaTier isa_tier_named(std::string_view name) {
#define MOETIER_ISA_TIER_NAMED(suffix, Enum, fallback, requirement) \
  if (name == #suffix) return IsaTier::Enum;
  MOETIER_ISA_TIERS(MOETIER_ISA_TIER_NAMED)
#undef MOETIER_ISA_TIER_NAMED
  throw "unknown ISA tier";
}

// "scalar", "avx2", "avxvnni", "avx512".
constexpr std::string_view isa_tier_name(IsaTier tier) {
  switch (tier) {
#define MOETIER_ISA_TIER_NAME(suffix, Enum, fallback, requirement) \
  case IsaTier::Enum: return #suffix;
    MOETIER_ISA_TIERS(MOETIER_ISA_TIER_NAME)
#undef MOETIER_ISA_TIER_NAME
  }
  return "?";
}
// The tier a family without a build for `tier` uses instead (kScalar for kScalar).
constexpr IsaTier isa_tier_fallback(IsaTier tier) {
  switch (tier) {
#define MOETIER_ISA_TIER_FALLBACK(suffix, Enum, fallback, requirement) \
  case IsaTier::Enum: return isa_tier_named(#fallback);
    MOETIER_ISA_TIERS(MOETIER_ISA_TIER_FALLBACK)
#undef MOETIER_ISA_TIER_FALLBACK
  }
  return IsaTier::kScalar;
}
// Whether the CPU runs the tier's builds (its requirement holds).
bool isa_tier_runs_on(IsaTier tier, const CpuFeatures& cpu);
// The most preferred tier the CPU runs.
IsaTier isa_tier(const CpuFeatures& cpu);
// isa_tier(cpu_features()), computed on the first call (after --cpu-isa was applied).
IsaTier cpu_isa_tier();

// find(t) over the tiers that serve `tier`, most preferred first (the tier, its fallback, and
// so on down to kScalar): the first result that is not null, else null.
template <class Find>
constexpr auto find_for_tier(IsaTier tier, const Find& find) -> decltype(find(tier)) {
  for (;;) {
    if (auto found = find(tier)) return found;
    if (tier == IsaTier::kScalar) return {};
    tier = isa_tier_fallback(tier);
  }
}

// A family's build for one tier (Build: a pointer to a kernel table or struct of entry points).
template <class Build>
struct TierBuild {
  IsaTier tier;
  Build build;
};
// The build that serves `tier` (find_for_tier over the family's builds).
template <class Build>
constexpr Build build_for_tier(std::span<const TierBuild<Build>> builds, IsaTier tier) {
  return find_for_tier(tier, [&](IsaTier t) -> Build {
    for (const TierBuild<Build>& b : builds) {
      if (b.tier == t) return b.build;
    }
    return {};
  });
}

}  // namespace moetier::cpu
