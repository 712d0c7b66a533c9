// The SiLU loops compiled with AVX-512, 16 lanes a vector (this tier's flags include
// -ffp-contract=off: bit-identical to the base build).
#include "cpu/silu_impl.h"
#include "cpu/silu.h"

namespace moetier::cpu::silu_lanes {

const SiluKernels kAvx512Build{.swiglu = swiglu_impl, .silu_in_place = silu_in_place_impl, .tier = IsaTier::kAvx512};

}  // namespace moetier::cpu::silu_lanes
