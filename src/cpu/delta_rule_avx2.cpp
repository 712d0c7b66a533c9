// The delta-rule step and token runs compiled with AVX2 (the users' laptop ISA; like every
// ISA tier unit it compiles with -ffp-contract=off, CMakeLists.txt, so the compiler vectorises
// the element-wise loops 8 wide without fusing multiply-adds: bit-identical to the scalar build).
#include "cpu/delta_rule_impl.h"

namespace moetier::cpu::delta_rule {

const DeltaRuleKernels kAvx2Build{.step = step_impl, .tokens = tokens_impl, .tier = IsaTier::kAvx2};

}  // namespace moetier::cpu::delta_rule
