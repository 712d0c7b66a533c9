// The base-ISA build of the SiLU loops (the reference) and the dispatch over the tiers' builds.
#include "cpu/silu.h"

#include "cpu/silu_impl.h"

namespace moetier::cpu {

const SiluKernels silu_lanes::kScalarBuild{
    .swiglu = silu_lanes::swiglu_impl, .silu_in_place = silu_lanes::silu_in_place_impl, .tier = IsaTier::kScalar};

const SiluKernels& silu_kernels(IsaTier tier) {
  static constexpr TierBuild<const SiluKernels*> kBuilds[] = {
      {IsaTier::kScalar, &silu_lanes::kScalarBuild},
      {IsaTier::kAvx2, &silu_lanes::kAvx2Build},
      {IsaTier::kAvx512, &silu_lanes::kAvx512Build},
  };
  return *build_for_tier<const SiluKernels*>(kBuilds, tier);
}

}  // namespace moetier::cpu
