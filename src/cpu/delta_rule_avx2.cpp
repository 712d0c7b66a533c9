// The delta-rule step and token runs compiled with AVX2 (the users' laptop ISA; -ffp-contract=off is added
// for this unit in CMakeLists.txt, so the compiler vectorises the element-wise loops 8 wide
// without fusing multiply-adds: results are bit-identical to step_generic).
#include "cpu/delta_rule_impl.h"

namespace moetier::cpu::delta_rule {

void step_avx2(const DeltaRuleStep& step) { step_impl(step); }
void tokens_avx2(const DeltaRuleTokens& run) { tokens_impl(run); }

}  // namespace moetier::cpu::delta_rule
