// Mixture-of-Experts FFN: softmax router over all experts, top-k, renormalised weights,
// SwiGLU experts, optional shared expert with a sigmoid gate.
//
// The expert path is one parallel region with four phases separated by barriers:
//   A  gate and up projections of every (expert, token) pair with SiLU(gate)·up fused in;
//   B  the SwiGLU rows converted to the down projection's activation type;
//   C  down projections into per-pair output rows;
//   D  per token, the weighted sum over its top-k experts (in top-k order, as llama.cpp
//      adds them) plus the gated shared expert.
// The input is converted to each needed activation type once per layer; tokens are grouped
// by expert so each used expert's weights are read once per micro-batch; work items are
// (expert, block of output rows: moe_plan_items) handed out dynamically, largest first, so
// the cores stay busy even when one expert gets most tokens. Buffers live in MoeScratch and
// only grow.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/profiler.h"
#include "core/thread_pool.h"
#include "cpu/dot.h"
#include "cpu/matmul.h"
#include "model/expert_source.h"

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
  // Set when the routed experts' bytes come from `experts` (then the *_exps stacks' data is
  // not read): the layer's index there.
  ExpertSource* experts = nullptr;
  int layer = -1;
};

// Binds a layer's MoE to `source` when the source serves that layer (a model's
// attach_experts calls it for each of its layers).
inline void attach_expert_source(MoeWeights& w, int layer, ExpertSource& source) {
  if (!source.serves(layer)) return;
  w.experts = &source;
  w.layer = layer;
  source.set_router(layer, w.router);
}

struct MoeShape {
  int64_t n_embd = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
};

// One SwiGLU FFN applied to a set of token rows: a routed expert with the tokens routed to
// it, or the shared expert with all tokens.
struct MoeFfnGroup {
  const cpu::WeightMatrix* gate = nullptr;
  const cpu::WeightMatrix* up = nullptr;
  const cpu::WeightMatrix* down = nullptr;
  int64_t mat = 0;                     // expert index in the stacks (0 for the shared expert)
  // The expert's first rows (the stacks' rows of `mat`, or where an ExpertSource keeps them).
  const uint8_t* gate_rows = nullptr;
  const uint8_t* up_rows = nullptr;
  const uint8_t* down_rows = nullptr;
  const uint8_t* x_gate = nullptr;     // [rows] input rows in gate's activation type
  const uint8_t* x_up = nullptr;       // [rows] input rows in up's activation type
  // Q8_0 activations' block terms for the tile kernels (cpu/dot.h), [rows][n_in / 32]:
  // x_gate's, x_up's and act_q's from act_q_first; nullptr for other activation types.
  const cpu::Q8_0ActBlock* blocks_gate = nullptr;
  const cpu::Q8_0ActBlock* blocks_up = nullptr;
  const cpu::Q8_0ActBlock* blocks_down = nullptr;
  int64_t rows = 0;
  float* act = nullptr;                // [rows][n_ff] SiLU(gate)·up
  cpu::QuantizedActivations* act_q = nullptr;  // act converted for down, from row act_q_first
  int64_t act_q_first = 0;
  float* out = nullptr;                // [rows][n_embd] down projection

  const uint8_t* gate_row(int64_t r) const { return gate_rows + r * gate->row_bytes; }
  const uint8_t* up_row(int64_t r) const { return up_rows + r * up->row_bytes; }
  const uint8_t* down_row(int64_t r) const { return down_rows + r * down->row_bytes; }
};

struct MoeWorkItem {
  int32_t group;
  int32_t row_begin, row_end;  // output rows of the projection (n_ff in phase A, n_embd in C)
};

// A group as the work plan sees it: its index, its tokens and its projection's output rows.
struct MoeItemGroup {
  int32_t group = 0;
  int64_t tokens = 0;
  int64_t n_out = 0;
};

// Rows per piece where a group with `tokens` tokens is cut short in phase A (down = false:
// gate/up rows) or C (down rows): 128 / 256 for one token, 32 / 64 for more.
int64_t moe_item_rows(int64_t tokens, bool down);

// The work items of phase A or C (the threads take them in order, each the next free one):
// groups sorted costliest first (cost ∝ tokens; `groups` is reordered), then cut in pieces
// of whole 8-row groups. Groups of several tokens: moe_item_rows pieces. One-token groups
// (decode, most experts of a small step): guided pieces, each 1 / (2·n_threads) of the
// one-token rows not yet cut, rounded up to moe_item_rows, at most the rest of the matrix.
// So the first pieces are whole matrices, one long stream each, which the hardware
// prefetchers follow (they restart at every jump to another piece), and the last ones are
// short, so the threads reach the barrier together.
void moe_plan_items(std::span<MoeItemGroup> groups, bool down, int n_threads, std::vector<MoeWorkItem>& items);

struct MoeScratch {
  cpu::ActivationCache input;  // h converted for the router, experts and shared expert
  std::vector<float> router_logits, shared_gate;
  std::vector<int32_t> order;            // [n_expert] top-k sort buffer
  std::vector<int32_t> selected;         // [n][n_expert_used]
  std::vector<float> selected_weight;    // [n][n_expert_used]
  std::vector<int32_t> expert_first;     // [n_expert + 1] first pair of each expert
  std::vector<int32_t> pair_token;       // [n·k] token of each pair, pairs grouped by expert
  std::vector<int32_t> pair_index;       // [n·k] pair position of (token t, slot k)
  std::vector<uint8_t> gathered_gate, gathered_up;  // [n·k] pair input rows
  std::vector<float> act_routed, act_shared;        // SwiGLU rows
  cpu::QuantizedActivations act_q_routed, act_q_shared;
  // Block terms of Q8_0 activation rows (empty for other types): the gathered gate/up
  // inputs, the shared expert's inputs, and the down projections' inputs.
  std::vector<cpu::Q8_0ActBlock> blocks_gate, blocks_up, blocks_shared_gate, blocks_shared_up;
  std::vector<cpu::Q8_0ActBlock> blocks_down_routed, blocks_down_shared;
  std::vector<float> out_routed, out_shared;        // [rows][n_embd]
  std::vector<MoeFfnGroup> groups;
  // Waves (see moe_block): the group indices of each, and the experts of the current one.
  std::vector<std::vector<int32_t>> waves;
  std::vector<int32_t> wave_experts, wave_order;
  std::vector<int64_t> wave_row_end;                // running row totals of the wave's groups
  int64_t requested_waves = 0;                      // waves whose experts were requested
  std::vector<MoeItemGroup> item_groups;
  std::vector<MoeWorkItem> items_up, items_down;
  std::atomic<int64_t> next_up{0}, next_down{0};
};

// For a layer whose dense part runs elsewhere (the GPU computes the router logits and the
// shared expert while the CPU computes the routed experts).
struct MoeOptions {
  const float* router_logits = nullptr;  // [n][n_expert]: use these instead of computing them
  // The routing, already chosen by the caller (moe_select_experts): [n][n_expert_used] each;
  // router_logits is then not read.
  const int32_t* selected = nullptr;
  const float* selected_weight = nullptr;
  // [n_expert], nonzero: the caller computes this expert's pairs elsewhere (the GPU's copy of
  // it) and adds them itself; they are left out of `out`.
  const uint8_t* experts_elsewhere = nullptr;
  bool skip_shared = false;              // leave the shared expert out of `out`
};

// The router's choice for n tokens from their logits [n][n_expert] (softmaxed in place):
// the top n_expert_used by probability (lower id first on ties) into selected[t·k + j] and
// their weights, renormalised over the k, into weight[t·k + j]. `order`: scratch.
void moe_select_experts(const MoeShape& s, float* logits, int64_t n, int32_t* selected, float* weight,
                        std::vector<int32_t>& order);

// h: [n][n_embd] (normalised); writes out: [n][n_embd]. profiler may be null.
void moe_block(const MoeWeights& w, const MoeShape& shape, const float* h, int64_t n, float* out,
               MoeScratch& scratch, ThreadPool& pool, Profiler* profiler, const MoeOptions& options = {});

}  // namespace moetier
