// Mixture-of-Experts FFN: softmax router over all experts, top-k, renormalised weights,
// SwiGLU experts, optional shared expert with a sigmoid gate. Tokens of the micro-batch
// are grouped by expert so each selected expert's weights are read once per micro-batch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/profiler.h"
#include "core/thread_pool.h"
#include "cpu/matmul.h"

namespace moetier {

struct MoeWeights {
  cpu::WeightMatrix router;     // {n_embd, n_expert}
  cpu::WeightMatrix gate_exps;  // {n_embd, n_ff_exp, n_expert}
  cpu::WeightMatrix up_exps;    // {n_embd, n_ff_exp, n_expert}
  cpu::WeightMatrix down_exps;  // {n_ff_exp, n_embd, n_expert}
  // Shared expert (absent when has_shared is false).
  bool has_shared = false;
  cpu::WeightMatrix shared_gate_inp;  // {n_embd, 1}: per-token gate sigmoid(shared_gate_inp · h)
  cpu::WeightMatrix gate_shexp;  // {n_embd, n_ff_shexp}
  cpu::WeightMatrix up_shexp;
  cpu::WeightMatrix down_shexp;  // {n_ff_shexp, n_embd}
};

struct MoeShape {
  int64_t n_embd = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
};

struct MoeScratch {
  std::vector<float> router_logits, shared_gate, probs, gate, up, act, down, gathered;
  std::vector<int32_t> selected;       // [n][n_expert_used]
  std::vector<float> selected_weight;  // [n][n_expert_used]
  std::vector<int32_t> expert_tokens;  // token ids grouped by expert
  std::vector<int32_t> expert_slot;    // slot index within the token's top-k
  cpu::QuantizedActivations act_q, tmp_q;
};

// h: [n][n_embd] (normalised); writes out: [n][n_embd]. profiler may be null.
void moe_block(const MoeWeights& w, const MoeShape& shape, const float* h, int64_t n, float* out,
               MoeScratch& scratch, ThreadPool& pool, Profiler* profiler);

}  // namespace moetier
