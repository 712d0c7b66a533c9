// The flash-attention kernels compiled with AVX-512 (16-lane vectors in one zmm register;
// this unit's flags include -ffp-contract=off): bit-identical to the scalar reference.
#include "cpu/flash_attention_impl.h"

namespace moetier::cpu {

const FlashKernels& flash_kernels_avx512() {
  static constexpr FlashKernels k{.attend = flash::attend_impl,
                                  .attend_part = flash::attend_part_impl,
                                  .combine = flash::combine_impl,
                                  .isa = "avx512"};
  return k;
}

}  // namespace moetier::cpu
