// The delta-rule step and token runs compiled with AVX-512 (this unit's flags include -ffp-contract=off,
// so the compiler vectorises the element-wise loops without fusing multiply-adds: results
// are bit-identical to the scalar build).
#include "cpu/delta_rule_impl.h"

namespace moetier::cpu::delta_rule {

const DeltaRuleKernels kAvx512Build{.step = step_impl, .tokens = tokens_impl, .tier = IsaTier::kAvx512};

}  // namespace moetier::cpu::delta_rule
