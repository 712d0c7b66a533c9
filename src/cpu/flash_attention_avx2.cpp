// The flash-attention kernels compiled with AVX2 + FMA + F16C (16-lane vectors as pairs of
// ymm registers). Like every ISA tier unit it compiles with -ffp-contract=off (CMakeLists.txt):
// the only fused multiply-adds are the explicit ones (fmadd, fmaf in the base build), so the results are
// bit-identical to the scalar reference.
#include "cpu/flash_attention_impl.h"

namespace moetier::cpu::flash {

const FlashKernels kAvx2Build{
    .attend = attend_impl, .attend_part = attend_part_impl, .combine = combine_impl, .tier = IsaTier::kAvx2};

}  // namespace moetier::cpu::flash
