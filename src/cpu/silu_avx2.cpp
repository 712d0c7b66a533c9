// The SiLU loops compiled with AVX2, 8 lanes a vector (-ffp-contract=off, as every ISA tier
// unit, CMakeLists.txt: bit-identical to the base build).
#include "cpu/silu_impl.h"
#include "cpu/silu.h"

namespace moetier::cpu::silu_lanes {

const SiluKernels kAvx2Build{.swiglu = swiglu_impl, .silu_in_place = silu_in_place_impl, .tier = IsaTier::kAvx2};

}  // namespace moetier::cpu::silu_lanes
