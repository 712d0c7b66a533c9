// Gated DeltaNet (linear attention with a delta-rule recurrent state), for one micro-batch
// that may hold several sequences (each a run of consecutive tokens). Used by qwen35moe's
// non-attention layers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/profiler.h"
#include "core/thread_pool.h"
#include "cpu/matmul.h"
#include "model/model.h"
#include "state/sequence_state.h"

namespace moetier {

struct DeltaNetWeights {
  cpu::WeightMatrix qkv;    // {n_embd, 2·key_dim + value_dim}, channels q | k | v
  cpu::WeightMatrix gate;   // {n_embd, value_dim}  (z)
  cpu::WeightMatrix beta;   // {n_embd, n_v_heads}
  cpu::WeightMatrix alpha;  // {n_embd, n_v_heads}
  cpu::WeightMatrix out;    // {value_dim, n_embd}
  const float* conv = nullptr;     // [channels][d_conv]; tap d_conv−1 multiplies the current token
  const float* conv_by_tap = nullptr;  // the same taps as [d_conv][channels] (conv_by_tap(), made at load)
  const float* dt_bias = nullptr;  // [n_v_heads]
  const float* a = nullptr;        // [n_v_heads], = −exp(A_log)
  const float* norm = nullptr;     // [d_state], gated RMSNorm weight shared by heads
};

struct DeltaNetShape {
  int64_t n_embd = 0;
  int64_t d_conv = 4;
  int64_t d_state = 0;     // d_k = d_v
  int64_t n_k_heads = 0;
  int64_t n_v_heads = 0;
  float rms_eps = 1e-6f;

  int64_t key_dim() const { return n_k_heads * d_state; }
  int64_t value_dim() const { return n_v_heads * d_state; }
  int64_t channels() const { return 2 * key_dim() + value_dim(); }
  // Per sequence: the last d_conv − 1 conv inputs, and one d_k × d_v state per V head.
  int64_t conv_state_elems() const { return (d_conv - 1) * channels(); }
  int64_t ssm_state_elems() const { return n_v_heads * d_state * d_state; }
};

struct DeltaNetScratch {
  std::vector<float> qkv, z, beta, alpha, conv_out, y;
  std::vector<float*> conv_states;   // [sequences]: each one's carried conv rows
  std::vector<float*> conv_journal;  // [tokens]: the journal's slot for the carried rows after each (or null)
  std::vector<float> head_tmp;   // [threads][2·d_v + 2·n]: the rule's scratch, β and decay per token
  std::vector<SequenceState::SsmPass> ssm_passes;  // [sequences]: where each reads, writes and records its state
  cpu::ActivationCache input;
  cpu::QuantizedActivations act;
};

// The conv weights [channels][d_conv] rearranged by tap, [d_conv][channels], so that the
// conv's sums run along contiguous channels (DeltaNetWeights::conv_by_tap).
std::vector<float> conv_by_tap(const float* conv, int64_t channels, int64_t d_conv);

// x: [n][n_embd] (normalised), n = the rows `seqs` cover; writes out: [n][n_embd]; updates
// the conv and recurrent state of layer `layer` of every sequence in `seqs`. Projections
// run once over all rows; the conv and the recurrence run per sequence.
void delta_net_block(const DeltaNetWeights& w, const DeltaNetShape& shape, const float* x,
                     std::span<const SeqRows> seqs, int layer, float* out, DeltaNetScratch& scratch,
                     ThreadPool& pool, Profiler* profiler = nullptr);

}  // namespace moetier
