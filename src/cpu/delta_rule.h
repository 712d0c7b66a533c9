// One token of the Gated DeltaNet delta rule for one V head, the recurrence of
// model/blocks/delta_net. S is the head's d_k × d_v state, row-major S[i][c]:
//   S ← decay·S;  δ = β·(v − Sᵀk);  S ← S + k δᵀ;  out = (Sᵀq)·q_scale
// Two passes over S, element-wise along c, sums over i in order. The same source is
// compiled for the base ISA, AVX2 and AVX-512 (delta_rule_<isa>.cpp, no FMA contraction), so
// every variant gives bit-identical results; the dispatcher picks the widest the CPU has.
#pragma once

#include <cstdint>

namespace moetier::cpu {

struct DeltaRuleStep {
  float* state = nullptr;       // [d_k][d_v], updated in place
  int64_t d_k = 0, d_v = 0;
  const float* q = nullptr;     // [d_k] (L2-normalised)
  const float* k = nullptr;     // [d_k] (L2-normalised)
  const float* v = nullptr;     // [d_v]
  float beta = 0, decay = 0, q_scale = 0;
  float* out = nullptr;         // [d_v]
  float* scratch = nullptr;     // [d_v]
};

void delta_rule_step(const DeltaRuleStep& step);

namespace delta_rule {
void step_generic(const DeltaRuleStep& step);
void step_avx2(const DeltaRuleStep& step);    // only when cpu_features().has_avx2_set()
void step_avx512(const DeltaRuleStep& step);  // only when cpu_features().has_avx512_set()
}  // namespace delta_rule

}  // namespace moetier::cpu
