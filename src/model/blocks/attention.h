// Softmax attention with a KV cache, for one micro-batch of consecutive tokens of one
// sequence. Used by qwen3moe (plain) and qwen35moe (with a sigmoid output gate).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/matmul.h"
#include "runtime/sequence_state.h"

namespace moetier {

struct AttentionWeights {
  cpu::WeightMatrix q;       // {n_embd, n_head·head_dim·(output_gate ? 2 : 1)}
  cpu::WeightMatrix k;       // {n_embd, n_head_kv·head_dim}
  cpu::WeightMatrix v;       // {n_embd, n_head_kv·head_dim}
  cpu::WeightMatrix out;     // {n_head·head_dim, n_embd}
  const float* q_norm = nullptr;  // [head_dim], per-head RMSNorm weight
  const float* k_norm = nullptr;  // [head_dim]
};

struct AttentionShape {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;          // NEOX-rotated dims at the start of each head
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;
  bool output_gate = false;   // q projection holds [query | gate] per head
};

struct AttentionScratch {
  std::vector<float> q_full, k, v, q, gate, attn, scores;
  std::vector<float> rope;    // [n_rot/2][cos, sin] of the current position
  std::vector<float> kv_f32;  // [threads][2][n_keys][head_dim]: one KV head's rows as f32
  cpu::ActivationCache input;
  cpu::QuantizedActivations act;
};

// x: [n][n_embd] (already normalised); writes out: [n][n_embd]. Token t sits at position
// seq.n_past() + t; its K/V rows are stored in `seq` layer `layer` before attending.
// The caller checks that the context has room.
void attention_block(const AttentionWeights& w, const AttentionShape& shape, const float* x, int64_t n, int layer,
                     SequenceState& seq, float* out, AttentionScratch& scratch, ThreadPool& pool);

}  // namespace moetier
