// Softmax attention with a KV cache, for one micro-batch that may hold several sequences
// (each a run of consecutive tokens). Used by qwen3moe (plain) and qwen35moe (with a
// sigmoid output gate).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/flash_attention.h"
#include "cpu/matmul.h"
#include "model/model.h"
#include "state/sequence_state.h"

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

  // The shape the hyper-parameters give (attn_output_gate: qwen35moe's gated attention).
  static AttentionShape of(const HParams& hp) {
    return {.n_embd = hp.n_embd,
            .n_head = hp.n_head,
            .n_head_kv = hp.n_head_kv,
            .head_dim = hp.head_dim_k,
            .n_rot = hp.n_rot,
            .rope_base = hp.rope_base,
            .rms_eps = hp.rms_eps,
            .output_gate = hp.attn_output_gate};
  }
};

// How the softmax attention is computed (-fa; the model passes it down, see
// Model::set_flash_attention).
struct AttentionOptions {
  // true: cpu/flash_attention.h (K/V tiles converted from the cache type into per-thread
  // buffers, online softmax; memory per thread independent of the depth). false: the exact
  // path (each item converts its KV head's whole prefix to f32, then softmax over all keys),
  // the tests' reference. Head sizes flash does not take (not a multiple of 32) run exact.
  bool flash = false;
};

struct AttentionScratch {
  std::vector<float> q_full, k, v, q, gate, attn, scores;
  std::vector<float> rope;    // [n_rot/2][cos, sin] of the current position
  std::vector<float> kv_f32;  // [threads][2][n_keys][head_dim]: one KV head's rows as f32
  struct Item {
    const SeqRows* seq;
    int64_t kv_head, row_begin, row_end;  // rows of the micro-batch
  };
  std::vector<Item> items;
  cpu::ActivationCache input;
  cpu::QuantizedActivations act;
  // Flash path: per-thread tile buffers, the tasks, and for a decode split over threads
  // (few tasks, many keys) one state per (task, part of kFlashPartKeys keys).
  std::vector<cpu::FlashScratch> flash;  // [threads]
  struct FlashItem {
    cpu::FlashAttentionTask task;
    int64_t partial = -1;  // first part slot when split over parts, else -1
  };
  std::vector<FlashItem> flash_items;
  struct FlashUnit {
    int64_t item, part;  // part −1: the whole item
  };
  std::vector<FlashUnit> flash_units;
  std::vector<cpu::FlashPartial> flash_partials;  // [slots]
  std::vector<float> partial_f;    // [slots][vectors][head_dim + 1]: o, then m
  std::vector<double> partial_d;   // [slots][vectors]: l
};

// x: [n][n_embd] (already normalised), n = the rows `seqs` cover; writes out: [n][n_embd].
// Row r of sequence s sits at position s.seq->n_past() + (r − s.row_begin); its K/V rows
// are stored in that sequence's layer `layer` before attending. Projections run once over
// all n rows; each row attends only to its own sequence. The caller checks that every
// context has room.
void attention_block(const AttentionWeights& w, const AttentionShape& shape, const float* x,
                     std::span<const SeqRows> seqs, int layer, float* out, AttentionScratch& scratch,
                     ThreadPool& pool, const AttentionOptions& options = {});

}  // namespace moetier
