// The base-ISA build of the delta rule (the reference) and the dispatch over the tiers' builds.
#include "cpu/delta_rule.h"

#include "cpu/delta_rule_impl.h"

namespace moetier::cpu {

const DeltaRuleKernels delta_rule::kScalarBuild{
    .step = delta_rule::step_impl, .tokens = delta_rule::tokens_impl, .tier = IsaTier::kScalar};

const DeltaRuleKernels& delta_rule_kernels(IsaTier tier) {
  static constexpr TierBuild<const DeltaRuleKernels*> kBuilds[] = {
      {IsaTier::kScalar, &delta_rule::kScalarBuild},
      {IsaTier::kAvx2, &delta_rule::kAvx2Build},
      {IsaTier::kAvx512, &delta_rule::kAvx512Build},
  };
  return *build_for_tier<const DeltaRuleKernels*>(kBuilds, tier);
}

void delta_rule_step(const DeltaRuleStep& step) {
  static const DeltaRuleKernels& k = delta_rule_kernels(cpu_isa_tier());
  k.step(step);
}

void delta_rule_tokens(const DeltaRuleTokens& run) {
  static const DeltaRuleKernels& k = delta_rule_kernels(cpu_isa_tier());
  k.tokens(run);
}

void delta_rule_replay(const DeltaRuleReplay& r) { delta_rule::replay_impl(r); }

}  // namespace moetier::cpu
