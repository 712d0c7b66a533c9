// The delta-rule step's loops, included by delta_rule.cpp and delta_rule_avx512.cpp so both
// compile the very same arithmetic (see delta_rule.h).
#pragma once

#include "cpu/delta_rule.h"

namespace moetier::cpu::delta_rule {

inline void step_impl(const DeltaRuleStep& p) {
  const int64_t dk = p.d_k, dv = p.d_v;
  float* __restrict sk = p.scratch;  // Sᵀk, then δ
  float* __restrict out = p.out;
  // Pass 1: S ← decay·S and Sᵀk.
  for (int64_t c = 0; c < dv; ++c) sk[c] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    float* __restrict Si = p.state + i * dv;
    const float ki = p.k[i];
    for (int64_t c = 0; c < dv; ++c) {
      Si[c] *= p.decay;
      sk[c] += Si[c] * ki;
    }
  }
  for (int64_t c = 0; c < dv; ++c) sk[c] = p.beta * (p.v[c] - sk[c]);
  // Pass 2: S ← S + k δᵀ and Sᵀq.
  for (int64_t c = 0; c < dv; ++c) out[c] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    float* __restrict Si = p.state + i * dv;
    const float ki = p.k[i], qi = p.q[i];
    for (int64_t c = 0; c < dv; ++c) {
      Si[c] += ki * sk[c];
      out[c] += Si[c] * qi;
    }
  }
  for (int64_t c = 0; c < dv; ++c) out[c] *= p.q_scale;
}

}  // namespace moetier::cpu::delta_rule
