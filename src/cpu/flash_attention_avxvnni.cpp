// The flash-attention kernels compiled with AVX2 + FMA + F16C + AVX-VNNI (the AVX2 build
// with VPDPBUSD for the integer Q·K of a Q8_0 K cache; everything else as in
// flash_attention_avx2.cpp). Like every ISA tier unit it compiles with -ffp-contract=off
// (CMakeLists.txt), so the results are bit-identical to the scalar reference.
#include "cpu/flash_attention_impl.h"

namespace moetier::cpu::flash {

const FlashKernels kAvxVnniBuild{
    .attend = attend_impl, .attend_part = attend_part_impl, .combine = combine_impl, .tier = IsaTier::kAvxVnni};

}  // namespace moetier::cpu::flash
