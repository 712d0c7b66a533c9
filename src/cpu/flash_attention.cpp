// The base-ISA build of the flash-attention kernels (the scalar reference: no ISA flags, so
// the 16-lane vectors become SSE2 or plain code) and the dispatch over the tiers' builds.
#include "cpu/flash_attention.h"

#include "cpu/flash_attention_impl.h"

namespace moetier::cpu {

void FlashScratch::reserve_for(int64_t head_dim, int64_t n_kv_heads, int64_t n_vectors) {
  const flash::Layout L = flash::layout(head_dim, n_kv_heads * head_dim, n_vectors);
  if (static_cast<int64_t>(f.size()) < L.n_f) f.resize(static_cast<size_t>(L.n_f));
  if (static_cast<int64_t>(d.size()) < L.n_d) d.resize(static_cast<size_t>(L.n_d));
}

size_t flash_scratch_bytes(int64_t head_dim, int64_t n_kv_heads, int64_t n_vectors) {
  const flash::Layout L = flash::layout(head_dim, n_kv_heads * head_dim, n_vectors);
  return static_cast<size_t>(L.n_f) * sizeof(float) + static_cast<size_t>(L.n_d) * sizeof(double);
}

const FlashKernels flash::kScalarBuild{.attend = flash::attend_impl,
                                       .attend_part = flash::attend_part_impl,
                                       .combine = flash::combine_impl,
                                       .tier = IsaTier::kScalar};

const FlashKernels& flash_kernels(IsaTier tier) {
  static constexpr TierBuild<const FlashKernels*> kBuilds[] = {
      {IsaTier::kScalar, &flash::kScalarBuild},
      {IsaTier::kAvx2, &flash::kAvx2Build},
      {IsaTier::kAvxVnni, &flash::kAvxVnniBuild},
      {IsaTier::kAvx512, &flash::kAvx512Build},
  };
  return *build_for_tier<const FlashKernels*>(kBuilds, tier);
}

const FlashKernels& flash_kernels(const CpuFeatures& cpu) { return flash_kernels(isa_tier(cpu)); }

}  // namespace moetier::cpu
