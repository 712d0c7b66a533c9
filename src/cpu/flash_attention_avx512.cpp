// The flash-attention kernels compiled with AVX-512 (16-lane vectors in one zmm register;
// this unit's flags include -ffp-contract=off): bit-identical to the scalar reference.
#include "cpu/flash_attention_impl.h"

namespace moetier::cpu::flash {

const FlashKernels kAvx512Build{
    .attend = attend_impl, .attend_part = attend_part_impl, .combine = combine_impl, .tier = IsaTier::kAvx512};

}  // namespace moetier::cpu::flash
