// The base-ISA build of the flash-attention kernels (the scalar reference: no ISA flags, so
// the 16-lane vectors become SSE2 or plain code) and the dispatch.
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

const FlashKernels& flash_kernels_scalar() {
  static constexpr FlashKernels k{.attend = flash::attend_impl,
                                  .attend_part = flash::attend_part_impl,
                                  .combine = flash::combine_impl,
                                  .isa = "scalar"};
  return k;
}

const FlashKernels& flash_kernels(const CpuFeatures& cpu) {
  if (cpu.has_avx512_set()) return flash_kernels_avx512();
  if (cpu.has_avx2_set() && cpu.avxvnni) return flash_kernels_avxvnni();
  if (cpu.has_avx2_set()) return flash_kernels_avx2();
  return flash_kernels_scalar();
}

}  // namespace moetier::cpu
