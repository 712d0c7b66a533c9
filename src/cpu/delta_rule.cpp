#include "cpu/delta_rule.h"

#include "core/cpu_features.h"
#include "cpu/delta_rule_impl.h"

namespace moetier::cpu {

void delta_rule::step_generic(const DeltaRuleStep& step) { step_impl(step); }
void delta_rule::tokens_generic(const DeltaRuleTokens& run) { tokens_impl(run); }

void delta_rule_step(const DeltaRuleStep& step) {
  static const bool avx512 = cpu_features().has_avx512_set();  // read-only CPU facts
  static const bool avx2 = cpu_features().has_avx2_set();
  if (avx512) {
    delta_rule::step_avx512(step);
  } else if (avx2) {
    delta_rule::step_avx2(step);
  } else {
    delta_rule::step_generic(step);
  }
}

void delta_rule_tokens(const DeltaRuleTokens& run) {
  static const bool avx512 = cpu_features().has_avx512_set();  // read-only CPU facts
  static const bool avx2 = cpu_features().has_avx2_set();
  if (avx512) {
    delta_rule::tokens_avx512(run);
  } else if (avx2) {
    delta_rule::tokens_avx2(run);
  } else {
    delta_rule::tokens_generic(run);
  }
}

}  // namespace moetier::cpu
