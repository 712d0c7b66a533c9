#include "model/blocks/moe.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cpu/dot.h"
#include "cpu/ops.h"
#include "tensor/blocks.h"

namespace moetier {

namespace {

template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Router: softmax over all experts, top-k by probability (lower id first on ties), weights
// renormalised over the picked k: w = p / max(Σp, 6.1035e-5) (the floor is fp16's
// smallest normal, as llama.cpp uses).
void route(const MoeShape& s, int64_t n, MoeScratch& sc) {
  grow(sc.selected, n * s.n_expert_used);
  grow(sc.selected_weight, n * s.n_expert_used);
  moe_select_experts(s, sc.router_logits.data(), n, sc.selected.data(), sc.selected_weight.data(), sc.order);
}

// Counting sort of the n·k (token, slot) pairs by expert. Pairs of experts computed
// elsewhere are left out (pair_index −1); expert_first[n_expert] is the pairs kept.
void group_pairs(const MoeShape& s, int64_t n, const uint8_t* elsewhere, MoeScratch& sc) {
  const int64_t n_pairs = n * s.n_expert_used;
  const auto kept = [&](int32_t e) { return elsewhere == nullptr || elsewhere[e] == 0; };
  sc.expert_first.assign(static_cast<size_t>(s.n_expert + 1), 0);
  for (int64_t p = 0; p < n_pairs; ++p) {
    const int32_t e = sc.selected[static_cast<size_t>(p)];
    if (kept(e)) ++sc.expert_first[static_cast<size_t>(e + 1)];
  }
  for (int64_t e = 0; e < s.n_expert; ++e) sc.expert_first[static_cast<size_t>(e + 1)] += sc.expert_first[static_cast<size_t>(e)];
  grow(sc.pair_token, n_pairs);
  grow(sc.pair_index, n_pairs);
  grow(sc.order, s.n_expert);
  std::copy(sc.expert_first.begin(), sc.expert_first.end() - 1, sc.order.begin());  // next free slot per expert
  for (int64_t p = 0; p < n_pairs; ++p) {  // p = t·k_used + k, in token order: stable
    const int32_t e = sc.selected[static_cast<size_t>(p)];
    if (!kept(e)) {
      sc.pair_index[static_cast<size_t>(p)] = -1;
      continue;
    }
    const int32_t pos = sc.order[static_cast<size_t>(e)]++;
    sc.pair_token[static_cast<size_t>(pos)] = static_cast<int32_t>(p / s.n_expert_used);
    sc.pair_index[static_cast<size_t>(p)] = pos;
  }
}

// Copies the pairs' input rows (in pair order) out of the converted input.
void gather_rows(const cpu::QuantizedActivations& x, const int32_t* pair_token, int64_t n_pairs,
                 std::vector<uint8_t>& dst) {
  grow(dst, n_pairs * x.row_bytes);
  for (int64_t p = 0; p < n_pairs; ++p) {
    std::memcpy(dst.data() + p * x.row_bytes, x.row(pair_token[p]), static_cast<size_t>(x.row_bytes));
  }
}

// The work items of phase A or C for a wave's groups (moe_plan_items), group = index into
// sc.groups.
void plan_items(MoeScratch& sc, std::span<const int32_t> wave, bool down, int n_threads,
                std::vector<MoeWorkItem>& items) {
  sc.item_groups.clear();
  for (const int32_t g : wave) {
    const MoeFfnGroup& group = sc.groups[static_cast<size_t>(g)];
    sc.item_groups.push_back({.group = g, .tokens = group.rows, .n_out = down ? group.down->n_out : group.gate->n_out});
  }
  moe_plan_items(sc.item_groups, down, n_threads, items);
}

// The routed experts (stack indices) of a wave's groups; the shared expert's group
// (index >= n_routed_groups) has none.
void experts_of(const std::vector<MoeFfnGroup>& groups, std::span<const int32_t> wave, int64_t n_routed_groups,
                std::vector<int32_t>& out) {
  out.clear();
  for (const int32_t g : wave) {
    if (g < n_routed_groups) out.push_back(static_cast<int32_t>(groups[static_cast<size_t>(g)].mat));
  }
}

// Predicting the next layer's experts pays for small batches only: a big batch routes to
// most experts of every layer anyway.
constexpr int64_t kPredictMaxTokens = 4;

// The waves: groups computed together between barriers (one parallel region each), the
// shared expert in the first. Experts in the stacks: one wave. From an ExpertSource:
//   * when the batch's experts fit the source's capacity (less n_expert_used slots kept
//     for reads of predicted experts), all are requested now (reads of the missing ones
//     start), then the next layer's are predicted; the experts already in memory form the
//     first wave and the rest the second, so their reads overlap the first's compute;
//   * else (a prompt batch routing to more experts than fit) waves of half that capacity,
//     the first requested now, each next one while the one before computes.
void plan_waves(const MoeWeights& w, const MoeShape& s, int64_t n_routed_groups, const float* h, int64_t n,
                MoeScratch& sc, ThreadPool& pool) {
  sc.waves.clear();
  const int64_t n_groups = static_cast<int64_t>(sc.groups.size());
  const auto shared_into = [&](std::vector<int32_t>& wave) {
    for (int64_t g = n_routed_groups; g < n_groups; ++g) wave.push_back(static_cast<int32_t>(g));
  };
  if (w.experts == nullptr) {
    sc.waves.emplace_back();
    for (int64_t g = 0; g < n_groups; ++g) sc.waves.back().push_back(static_cast<int32_t>(g));
    return;
  }
  const int64_t limit = std::max<int64_t>(1, w.experts->capacity(w.layer) - s.n_expert_used);
  if (n_routed_groups <= limit) {
    sc.wave_order.clear();
    for (int64_t g = 0; g < n_routed_groups; ++g) sc.wave_order.push_back(static_cast<int32_t>(g));
    experts_of(sc.groups, sc.wave_order, n_routed_groups, sc.wave_experts);
    w.experts->request(w.layer, sc.wave_experts);
    if (n <= kPredictMaxTokens) w.experts->predict_next(w.layer, h, n, pool);
    std::vector<int32_t> in_memory, reading;
    for (int64_t g = 0; g < n_routed_groups; ++g) {
      const bool ready = w.experts->ready(w.layer, static_cast<int32_t>(sc.groups[static_cast<size_t>(g)].mat));
      (ready ? in_memory : reading).push_back(static_cast<int32_t>(g));
    }
    sc.waves.push_back(std::move(in_memory));
    shared_into(sc.waves.back());
    if (!reading.empty()) sc.waves.push_back(std::move(reading));
    if (sc.waves.front().empty()) sc.waves.erase(sc.waves.begin());
    sc.requested_waves = static_cast<int64_t>(sc.waves.size());
    return;
  }
  // The experts in memory first: a cache smaller than the layer would otherwise see the
  // same ascending scan every batch and evict each expert just before it is needed again.
  sc.wave_order.clear();
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t g = 0; g < n_routed_groups; ++g) {
      const bool ready = w.experts->ready(w.layer, static_cast<int32_t>(sc.groups[static_cast<size_t>(g)].mat));
      if (ready == (pass == 0)) sc.wave_order.push_back(static_cast<int32_t>(g));
    }
  }
  const int64_t per_wave = std::max<int64_t>(1, limit / 2);
  for (int64_t i = 0; i < n_routed_groups; i += per_wave) {
    sc.waves.emplace_back(sc.wave_order.begin() + i, sc.wave_order.begin() + std::min(n_routed_groups, i + per_wave));
  }
  shared_into(sc.waves.front());
  experts_of(sc.groups, sc.waves.front(), n_routed_groups, sc.wave_experts);
  w.experts->request(w.layer, sc.wave_experts);
  sc.requested_waves = 1;
}

// From this many tokens in a group on, a kernel's tile form (cpu/dot.h: kTileRows rows
// against all the group's tokens, weights repacked per call) beats the per-row form.
constexpr int64_t kTileMinTokens = 8;
bool use_tile(const cpu::DotKernel& k, int64_t tokens) { return k.tile != nullptr && tokens >= kTileMinTokens; }

// The block terms of `n_rows` activation rows when their type is Q8_0 (what its tile
// kernel needs beside the rows; cpu/dot.h), else nothing: out = [n_rows][n_in / 32].
void act_blocks_for(DType type, const uint8_t* rows, int64_t row_bytes, int64_t n_rows, int64_t n_in,
                    std::vector<cpu::Q8_0ActBlock>& out, ThreadPool& pool) {
  if (type != DType::Q8_0) {
    out.clear();
    return;
  }
  const int64_t n_blocks = n_in / kQK8_0;
  grow(out, n_rows * n_blocks);
  pool.parallel_for(n_rows, 64, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) cpu::dot::q8_0_act_blocks(n_in, rows + r * row_bytes, out.data() + r * n_blocks);
  });
}
const cpu::Q8_0ActBlock* blocks_at(const std::vector<cpu::Q8_0ActBlock>& blocks, int64_t row, int64_t n_in) {
  return blocks.empty() ? nullptr : blocks.data() + row * (n_in / kQK8_0);
}

// Phase A with tile kernels: kTileRows rows of gate and of up at a time, every token of
// the group; bit-identical to the per-row form. gate_tile / up_tile are the kernels' tile
// or, for interleaved rows (cpu/interleave.h), tile_x8 forms.
void gate_up_tiled(const MoeFfnGroup& g, cpu::TileDotFn gate_tile, cpu::TileDotFn up_tile, int64_t row_begin,
                   int64_t row_end, int64_t gate_stride, int64_t up_stride) {
  const int64_t n_in = g.gate->n_in, n_ff = g.gate->n_out;
  // [token][row of the tile]; on the stack for the usual few tokens of a routed expert.
  constexpr int64_t kStackTokens = 32;
  float gate_stack[kStackTokens * cpu::kTileRows], up_stack[kStackTokens * cpu::kTileRows];
  std::vector<float> gate_heap, up_heap;
  float* gv = gate_stack;
  float* uv = up_stack;
  if (g.rows > kStackTokens) {
    gate_heap.resize(static_cast<size_t>(g.rows * cpu::kTileRows));
    up_heap.resize(gate_heap.size());
    gv = gate_heap.data(), uv = up_heap.data();
  }
  for (int64_t o = row_begin; o < row_end; o += cpu::kTileRows) {
    const int rows = static_cast<int>(std::min<int64_t>(cpu::kTileRows, row_end - o));
    const cpu::TileDotArgs base{.n = n_in, .n_rows = rows, .n_act = g.rows, .out_stride = cpu::kTileRows};
    cpu::TileDotArgs ga = base, ua = base;
    ga.weight_rows = g.gate_row(o), ga.weight_stride = g.gate->row_bytes;
    ga.activation_rows = g.x_gate, ga.activation_stride = gate_stride, ga.act_blocks = g.blocks_gate, ga.out = gv;
    ua.weight_rows = g.up_row(o), ua.weight_stride = g.up->row_bytes;
    ua.activation_rows = g.x_up, ua.activation_stride = up_stride, ua.act_blocks = g.blocks_up, ua.out = uv;
    gate_tile(ga);
    up_tile(ua);
    for (int64_t t = 0; t < g.rows; ++t) {
      const int64_t at = t * cpu::kTileRows;
      cpu::swiglu(gv + at, uv + at, rows, g.act + t * n_ff + o);
    }
  }
}

// Interleaved gate and up rows (the loader interleaves a layer's pair together): every
// token count goes through tile_x8, items being whole groups of 8 rows.
bool interleaved(const cpu::WeightMatrix& w) { return w.layout == cpu::RowLayout::kInterleaved8; }

// Phase A for one item: act[t][o] = SiLU(gate_o · x_t) · (up_o · x_t).
void gate_up_rows(const MoeFfnGroup& g, const cpu::DotKernel& gate_k, const cpu::DotKernel& up_k, int64_t row_begin,
                  int64_t row_end, int64_t gate_stride, int64_t up_stride) {
  if (interleaved(*g.gate)) {
    CHECK(interleaved(*g.up) && gate_k.tile_x8 && up_k.tile_x8 && row_begin % cpu::kTileRows == 0 &&
          row_end % cpu::kTileRows == 0);
    gate_up_tiled(g, gate_k.tile_x8, up_k.tile_x8, row_begin, row_end, gate_stride, up_stride);
    return;
  }
  if (use_tile(gate_k, g.rows) && use_tile(up_k, g.rows)) {
    gate_up_tiled(g, gate_k.tile, up_k.tile, row_begin, row_end, gate_stride, up_stride);
    return;
  }
  const int64_t n_in = g.gate->n_in, n_ff = g.gate->n_out;
  float gv[cpu::kMaxDotRows], uv[cpu::kMaxDotRows];
  for (int64_t o = row_begin; o < row_end; ++o) {
    const uint8_t* gate_row = g.gate_row(o);
    const uint8_t* up_row = g.up_row(o);
    if (g.rows == 1 && o + cpu::kPrefetchRows < row_end) {
      cpu::prefetch_row(g.gate_row(o + cpu::kPrefetchRows), g.gate->row_bytes);
      cpu::prefetch_row(g.up_row(o + cpu::kPrefetchRows), g.up->row_bytes);
    }
    for (int64_t t = 0; t < g.rows; t += cpu::kMaxDotRows) {
      const int m = static_cast<int>(std::min<int64_t>(cpu::kMaxDotRows, g.rows - t));
      cpu::dot_rows(gate_k, n_in, gate_row, g.x_gate + t * gate_stride, gate_stride, m, gv);
      cpu::dot_rows(up_k, n_in, up_row, g.x_up + t * up_stride, up_stride, m, uv);
      for (int j = 0; j < m; ++j) g.act[(t + j) * n_ff + o] = cpu::silu(gv[j]) * uv[j];
    }
  }
}

// Phase C for one item: out[t][o] = down_o · act_t.
void down_rows(const MoeFfnGroup& g, const cpu::DotKernel& down_k, int64_t row_begin, int64_t row_end) {
  const int64_t n_in = g.down->n_in, n_embd = g.down->n_out;
  const int64_t stride = g.act_q->row_bytes;
  const bool x8 = interleaved(*g.down);
  CHECK(!x8 || (down_k.tile_x8 && row_begin % cpu::kTileRows == 0 && row_end % cpu::kTileRows == 0));
  if (x8 || use_tile(down_k, g.rows)) {
    const cpu::TileDotFn tile = x8 ? down_k.tile_x8 : down_k.tile;
    for (int64_t o = row_begin; o < row_end; o += cpu::kTileRows) {
      tile({.n = n_in,
           .weight_rows = g.down_row(o),
           .weight_stride = g.down->row_bytes,
           .n_rows = static_cast<int>(std::min<int64_t>(cpu::kTileRows, row_end - o)),
           .activation_rows = g.act_q->row(g.act_q_first),
           .activation_stride = stride,
           .n_act = g.rows,
           .act_blocks = g.blocks_down,
           .out = g.out + o,
           .out_stride = n_embd});
    }
    return;
  }
  float dv[cpu::kMaxDotRows];
  for (int64_t o = row_begin; o < row_end; ++o) {
    const uint8_t* down_row = g.down_row(o);
    if (g.rows == 1 && o + cpu::kPrefetchRows < row_end) {
      cpu::prefetch_row(g.down_row(o + cpu::kPrefetchRows), g.down->row_bytes);
    }
    for (int64_t t = 0; t < g.rows; t += cpu::kMaxDotRows) {
      const int m = static_cast<int>(std::min<int64_t>(cpu::kMaxDotRows, g.rows - t));
      cpu::dot_rows(down_k, n_in, down_row, g.act_q->row(g.act_q_first + t), stride, m, dv);
      for (int j = 0; j < m; ++j) g.out[(t + j) * n_embd + o] = dv[j];
    }
  }
}

const cpu::DotKernel& kernel_for(const cpu::WeightMatrix& w) {
  const cpu::DotKernel* k = cpu::best_dot_kernel(w.type, cpu_features());
  CHECK_MSG(k != nullptr, "no kernels for weight type {}", dtype_name(w.type));
  return *k;
}

}  // namespace

void moe_select_experts(const MoeShape& s, float* logits, int64_t n, int32_t* selected, float* weight,
                        std::vector<int32_t>& order_scratch) {
  grow(order_scratch, s.n_expert);
  auto order = order_scratch.begin();
  for (int64_t t = 0; t < n; ++t) {
    float* p = logits + t * s.n_expert;
    cpu::softmax(p, s.n_expert);
    std::iota(order, order + s.n_expert, 0);
    std::partial_sort(order, order + s.n_expert_used, order + s.n_expert,
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t k = 0; k < s.n_expert_used; ++k) sum += p[order[k]];
    sum = std::max(sum, 6.1035e-5f);
    for (int64_t k = 0; k < s.n_expert_used; ++k) {
      selected[t * s.n_expert_used + k] = order[k];
      weight[t * s.n_expert_used + k] = p[order[k]] / sum;
    }
  }
}

// Rows per piece where a group is cut short (moe_plan_items). A one-token group (every group
// in decode, most routed experts of a 2-16-token step) is a stream of weight rows, so even
// its short pieces are long; groups of more tokens cost more per row and get shorter pieces,
// for balance between threads.
int64_t moe_item_rows(int64_t tokens, bool down) {
  if (tokens == 1) return down ? 256 : 128;
  return down ? 64 : 32;
}

void moe_plan_items(std::span<MoeItemGroup> groups, bool down, int n_threads, std::vector<MoeWorkItem>& items) {
  items.clear();
  // Costliest first (cost ∝ tokens); groups of one cost keep their order.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const MoeItemGroup& a, const MoeItemGroup& b) { return a.tokens > b.tokens; });
  const int64_t parts = 2 * std::max(1, n_threads);
  int64_t one_token_left = 0;  // rows of one-token groups not yet cut
  for (const MoeItemGroup& g : groups) {
    if (g.tokens == 1) one_token_left += g.n_out;
  }
  for (const MoeItemGroup& g : groups) {
    const int64_t fine = moe_item_rows(g.tokens, down);
    for (int64_t r = 0; r < g.n_out;) {
      int64_t piece = fine;
      if (g.tokens == 1) {
        const int64_t share = (one_token_left + parts - 1) / parts;
        piece = std::max(fine, (share + fine - 1) / fine * fine);
      }
      const int64_t end = std::min(g.n_out, r + piece);
      if (g.tokens == 1) one_token_left -= end - r;
      items.push_back({g.group, static_cast<int32_t>(r), static_cast<int32_t>(end)});
      r = end;
    }
  }
}

void moe_block(const MoeWeights& w_in, const MoeShape& s, const float* h, int64_t n, float* out, MoeScratch& sc,
               ThreadPool& pool, Profiler* profiler, const MoeOptions& options) {
  MoeWeights w = w_in;
  if (options.skip_shared) w.has_shared = false;
  const int64_t d = s.n_embd;
  sc.input.reset(h, n, d);
  {
    ScopedProfile p(profiler, ProfileBlock::kMoeRouter);
    if (options.selected != nullptr) {
      const int64_t n_sel = n * s.n_expert_used;
      grow(sc.selected, n_sel);
      grow(sc.selected_weight, n_sel);
      std::copy(options.selected, options.selected + n_sel, sc.selected.begin());
      std::copy(options.selected_weight, options.selected_weight + n_sel, sc.selected_weight.begin());
    } else {
      grow(sc.router_logits, n * s.n_expert);
      if (options.router_logits) {
        std::copy(options.router_logits, options.router_logits + n * s.n_expert, sc.router_logits.begin());
      } else {
        cpu::matmul_cached(w.router, 0, sc.input, sc.router_logits.data(), pool);
      }
      route(s, n, sc);
    }
    group_pairs(s, n, options.experts_elsewhere, sc);
  }
  // The pairs computed here (all n·k unless some experts are computed elsewhere).
  const int64_t n_pairs = sc.expert_first[static_cast<size_t>(s.n_expert)];
  if (profiler) {
    int64_t distinct = 0;
    for (int64_t e = 0; e < s.n_expert; ++e) distinct += sc.expert_first[static_cast<size_t>(e + 1)] > sc.expert_first[static_cast<size_t>(e)];
    profiler->add_moe(distinct, n_pairs);
  }
  ScopedProfile p(profiler, ProfileBlock::kMoeExperts);
  if (w.has_shared) {
    grow(sc.shared_gate, n);
    cpu::matmul_cached(w.shared_gate_inp, 0, sc.input, sc.shared_gate.data(), pool);
  }

  // Inputs: routed pairs gathered in expert order; the shared expert reads h directly.
  const cpu::QuantizedActivations& x_gate = sc.input.get(w.gate_exps.type, pool);
  const cpu::QuantizedActivations& x_up = sc.input.get(w.up_exps.type, pool);
  gather_rows(x_gate, sc.pair_token.data(), n_pairs, sc.gathered_gate);
  const bool same_up_input = x_up.type == x_gate.type;
  if (!same_up_input) gather_rows(x_up, sc.pair_token.data(), n_pairs, sc.gathered_up);
  const uint8_t* up_rows = same_up_input ? sc.gathered_gate.data() : sc.gathered_up.data();
  act_blocks_for(x_gate.type, sc.gathered_gate.data(), x_gate.row_bytes, n_pairs, d, sc.blocks_gate, pool);
  if (!same_up_input) act_blocks_for(x_up.type, up_rows, x_up.row_bytes, n_pairs, d, sc.blocks_up, pool);
  const std::vector<cpu::Q8_0ActBlock>& blocks_up = same_up_input ? sc.blocks_gate : sc.blocks_up;
  const DType down_act_type = *cpu::activation_type_for(w.down_exps.type);

  grow(sc.act_routed, n_pairs * s.n_ff_exp);
  grow(sc.out_routed, n_pairs * d);
  cpu::prepare_activations(down_act_type, n_pairs, s.n_ff_exp, sc.act_q_routed);
  if (down_act_type == DType::Q8_0) {
    grow(sc.blocks_down_routed, n_pairs * (s.n_ff_exp / kQK8_0));  // filled in phase B
  } else {
    sc.blocks_down_routed.clear();
  }
  sc.groups.clear();
  for (int64_t e = 0; e < s.n_expert; ++e) {
    const int64_t first = sc.expert_first[static_cast<size_t>(e)];
    const int64_t rows = sc.expert_first[static_cast<size_t>(e + 1)] - first;
    if (rows == 0) continue;
    // From an ExpertSource the rows are known once the expert is in memory (set per wave).
    const bool in_stacks = w.experts == nullptr;
    sc.groups.push_back({.gate = &w.gate_exps,
                         .up = &w.up_exps,
                         .down = &w.down_exps,
                         .mat = e,
                         .gate_rows = in_stacks ? w.gate_exps.row(e, 0) : nullptr,
                         .up_rows = in_stacks ? w.up_exps.row(e, 0) : nullptr,
                         .down_rows = in_stacks ? w.down_exps.row(e, 0) : nullptr,
                         .x_gate = sc.gathered_gate.data() + first * x_gate.row_bytes,
                         .x_up = up_rows + first * x_up.row_bytes,
                         .blocks_gate = blocks_at(sc.blocks_gate, first, d),
                         .blocks_up = blocks_at(blocks_up, first, d),
                         .blocks_down = blocks_at(sc.blocks_down_routed, first, s.n_ff_exp),
                         .rows = rows,
                         .act = sc.act_routed.data() + first * s.n_ff_exp,
                         .act_q = &sc.act_q_routed,
                         .act_q_first = first,
                         .out = sc.out_routed.data() + first * d});
  }
  const int64_t n_routed_groups = static_cast<int64_t>(sc.groups.size());
  if (w.has_shared) {
    const cpu::QuantizedActivations& xs_gate = sc.input.get(w.gate_shexp.type, pool);
    const cpu::QuantizedActivations& xs_up = sc.input.get(w.up_shexp.type, pool);
    grow(sc.act_shared, n * s.n_ff_shexp);
    grow(sc.out_shared, n * d);
    const DType shared_down_act_type = *cpu::activation_type_for(w.down_shexp.type);
    cpu::prepare_activations(shared_down_act_type, n, s.n_ff_shexp, sc.act_q_shared);
    act_blocks_for(xs_gate.type, xs_gate.bytes.data(), xs_gate.row_bytes, n, d, sc.blocks_shared_gate, pool);
    const bool same_shared_input = xs_up.type == xs_gate.type;  // one conversion: its block terms once
    if (!same_shared_input) act_blocks_for(xs_up.type, xs_up.bytes.data(), xs_up.row_bytes, n, d, sc.blocks_shared_up, pool);
    if (shared_down_act_type == DType::Q8_0) {
      grow(sc.blocks_down_shared, n * (s.n_ff_shexp / kQK8_0));  // filled in phase B
    } else {
      sc.blocks_down_shared.clear();
    }
    sc.groups.push_back({.gate = &w.gate_shexp,
                         .up = &w.up_shexp,
                         .down = &w.down_shexp,
                         .mat = 0,
                         .gate_rows = w.gate_shexp.row(0, 0),
                         .up_rows = w.up_shexp.row(0, 0),
                         .down_rows = w.down_shexp.row(0, 0),
                         .x_gate = xs_gate.bytes.data(),
                         .x_up = xs_up.bytes.data(),
                         .blocks_gate = blocks_at(sc.blocks_shared_gate, 0, d),
                         .blocks_up = blocks_at(same_shared_input ? sc.blocks_shared_gate : sc.blocks_shared_up, 0, d),
                         .blocks_down = blocks_at(sc.blocks_down_shared, 0, s.n_ff_shexp),
                         .rows = n,
                         .act = sc.act_shared.data(),
                         .act_q = &sc.act_q_shared,
                         .act_q_first = 0,
                         .out = sc.out_shared.data()});
  }
  const cpu::DotKernel& gate_k = kernel_for(w.gate_exps);
  const cpu::DotKernel& up_k = kernel_for(w.up_exps);
  const cpu::DotKernel& down_k = kernel_for(w.down_exps);
  const cpu::DotKernel* shared_k[3] = {nullptr, nullptr, nullptr};
  if (w.has_shared) shared_k[0] = &kernel_for(w.gate_shexp), shared_k[1] = &kernel_for(w.up_shexp),
                    shared_k[2] = &kernel_for(w.down_shexp);
  const int64_t stride_gate = x_gate.row_bytes, stride_up = x_up.row_bytes;
  const int64_t stride_shared_gate = w.has_shared ? sc.input.get(w.gate_shexp.type, pool).row_bytes : 0;
  const int64_t stride_shared_up = w.has_shared ? sc.input.get(w.up_shexp.type, pool).row_bytes : 0;

  plan_waves(w, s, n_routed_groups, h, n, sc, pool);
  if (sc.waves.empty()) sc.waves.emplace_back();  // nothing to compute here: phase D still writes `out`
  for (size_t wave_index = 0; wave_index < sc.waves.size(); ++wave_index) {
    const std::vector<int32_t>& wave = sc.waves[wave_index];
    const bool last_wave = wave_index + 1 == sc.waves.size();
    if (w.experts) {
      // A big batch in several waves: the next wave's reads start before this one computes.
      if (wave_index + 1 < sc.waves.size() && !sc.waves[wave_index + 1].empty()) {
        experts_of(sc.groups, sc.waves[wave_index + 1], n_routed_groups, sc.wave_experts);
        if (static_cast<int64_t>(wave_index) + 1 >= sc.requested_waves) {
          w.experts->request(w.layer, sc.wave_experts);
          sc.requested_waves = static_cast<int64_t>(wave_index) + 2;
        }
      }
      ScopedProfile wait_profile(profiler, ProfileBlock::kMoeExpertWait, ProfileBlock::kMoeExperts);
      for (int32_t g : wave) {
        if (g >= n_routed_groups) continue;
        MoeFfnGroup& group = sc.groups[static_cast<size_t>(g)];
        const ExpertRows r = w.experts->wait(w.layer, static_cast<int32_t>(group.mat));
        group.gate_rows = r.gate, group.up_rows = r.up, group.down_rows = r.down;
      }
    }
    plan_items(sc, wave, /*down=*/false, pool.size(), sc.items_up);
    plan_items(sc, wave, /*down=*/true, pool.size(), sc.items_down);
    // Phase B's rows: the wave's groups' rows one after another.
    sc.wave_row_end.clear();
    int64_t wave_rows = 0;
    for (int32_t g : wave) sc.wave_row_end.push_back(wave_rows += sc.groups[static_cast<size_t>(g)].rows);
    sc.next_up.store(0);
    sc.next_down.store(0);

    pool.run([&](int thread) {
      const int n_threads = pool.size();
      // A: gate, up, SwiGLU.
      for (int64_t i; (i = sc.next_up.fetch_add(1)) < static_cast<int64_t>(sc.items_up.size());) {
        const MoeWorkItem& it = sc.items_up[static_cast<size_t>(i)];
        const MoeFfnGroup& g = sc.groups[static_cast<size_t>(it.group)];
        if (it.group < n_routed_groups) {
          gate_up_rows(g, gate_k, up_k, it.row_begin, it.row_end, stride_gate, stride_up);
        } else {
          gate_up_rows(g, *shared_k[0], *shared_k[1], it.row_begin, it.row_end, stride_shared_gate, stride_shared_up);
        }
      }
      pool.barrier();
      // B: SwiGLU rows → the down projections' activation types; this thread's share of the
      // wave's rows.
      const int64_t r_begin = wave_rows * thread / n_threads, r_end = wave_rows * (thread + 1) / n_threads;
      size_t gi = static_cast<size_t>(std::upper_bound(sc.wave_row_end.begin(), sc.wave_row_end.end(), r_begin) -
                                      sc.wave_row_end.begin());
      for (int64_t r = r_begin; r < r_end; ++r) {
        while (r >= sc.wave_row_end[gi]) ++gi;
        const int32_t group_index = wave[gi];
        const MoeFfnGroup& g = sc.groups[static_cast<size_t>(group_index)];
        const int64_t row = g.act_q_first + g.rows - (sc.wave_row_end[gi] - r);  // row of act_q
        const int64_t n_ff = g.gate->n_out;
        cpu::quantize_activation_row(g.act + (row - g.act_q_first) * n_ff, *g.act_q, row);
        if (g.blocks_down != nullptr) {
          cpu::dot::q8_0_act_blocks(n_ff, g.act_q->row(row),
                                    const_cast<cpu::Q8_0ActBlock*>(g.blocks_down) + (row - g.act_q_first) * (n_ff / kQK8_0));
        }
      }
      pool.barrier();
      // C: down projections.
      for (int64_t i; (i = sc.next_down.fetch_add(1)) < static_cast<int64_t>(sc.items_down.size());) {
        const MoeWorkItem& it = sc.items_down[static_cast<size_t>(i)];
        const MoeFfnGroup& g = sc.groups[static_cast<size_t>(it.group)];
        down_rows(g, it.group < n_routed_groups ? down_k : *shared_k[2], it.row_begin, it.row_end);
      }
      if (!last_wave) return;
      pool.barrier();
      // D: out[t] = Σ_k w_tk · e_tk (top-k order) + sigmoid(g_t) · shared_t.
      for (int64_t t = n * thread / n_threads; t < n * (thread + 1) / n_threads; ++t) {
        float* o = out + t * d;
        std::memset(o, 0, static_cast<size_t>(d) * sizeof(float));
        for (int64_t k = 0; k < s.n_expert_used; ++k) {
          const int64_t pair = sc.pair_index[static_cast<size_t>(t * s.n_expert_used + k)];
          if (pair < 0) continue;  // computed elsewhere
          cpu::axpy(sc.selected_weight[static_cast<size_t>(t * s.n_expert_used + k)],
                    sc.out_routed.data() + pair * d, d, o);
        }
        if (w.has_shared) cpu::axpy(cpu::sigmoid(sc.shared_gate[static_cast<size_t>(t)]), sc.out_shared.data() + t * d, d, o);
      }
    });
    if (w.experts) {
      experts_of(sc.groups, wave, n_routed_groups, sc.wave_experts);
      w.experts->release(w.layer, sc.wave_experts);
    }
  }
}

}  // namespace moetier
