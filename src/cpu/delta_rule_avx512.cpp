// The delta-rule step and token runs compiled with AVX-512 (this unit's flags include -ffp-contract=off,
// so the compiler vectorises the element-wise loops without fusing multiply-adds: results
// are bit-identical to step_generic).
#include "cpu/delta_rule_impl.h"

namespace moetier::cpu::delta_rule {

void step_avx512(const DeltaRuleStep& step) { step_impl(step); }
void tokens_avx512(const DeltaRuleTokens& run) { tokens_impl(run); }

}  // namespace moetier::cpu::delta_rule
