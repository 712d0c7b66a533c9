#include "model/blocks/moe.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cpu/dot.h"
#include "cpu/ops.h"

namespace moetier {

namespace {

// Router: softmax over all experts, top-k by probability (lower id first on ties), weights
// renormalised over the picked k: w = p / max(Σp, 6.1035e-5) (the floor is fp16's
// smallest normal, as llama.cpp uses).
void route(const MoeShape& s, int64_t n, MoeScratch& sc) {
  sc.selected.resize(static_cast<size_t>(n * s.n_expert_used));
  sc.selected_weight.resize(static_cast<size_t>(n * s.n_expert_used));
  std::vector<int32_t> order(static_cast<size_t>(s.n_expert));
  for (int64_t t = 0; t < n; ++t) {
    float* p = sc.router_logits.data() + t * s.n_expert;
    cpu::softmax(p, s.n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + s.n_expert_used, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t k = 0; k < s.n_expert_used; ++k) sum += p[order[static_cast<size_t>(k)]];
    sum = std::max(sum, 6.1035e-5f);
    for (int64_t k = 0; k < s.n_expert_used; ++k) {
      sc.selected[static_cast<size_t>(t * s.n_expert_used + k)] = order[static_cast<size_t>(k)];
      sc.selected_weight[static_cast<size_t>(t * s.n_expert_used + k)] = p[order[static_cast<size_t>(k)]] / sum;
    }
  }
}

// down(SiLU(gate·x) ⊙ (up·x)) for the f32 rows x[rows][n_embd], expert `e` of the
// stacks; result in sc.down [rows][n_embd]. Activations are converted once when gate and
// up share an activation type (the usual case), separately otherwise.
void expert_ffn(const cpu::WeightMatrix& gate, const cpu::WeightMatrix& up, const cpu::WeightMatrix& down,
                int64_t e, const float* x, int64_t rows, int64_t n_ff, MoeScratch& sc, ThreadPool& pool) {
  sc.gate.resize(static_cast<size_t>(rows * n_ff));
  sc.up.resize(static_cast<size_t>(rows * n_ff));
  sc.act.resize(static_cast<size_t>(rows * n_ff));
  sc.down.resize(static_cast<size_t>(rows * down.n_out));
  const DType gate_act = *cpu::activation_type_for(gate.type);
  cpu::quantize_activations(gate_act, x, rows, gate.n_in, sc.act_q, pool);
  cpu::matmul(gate, e, sc.act_q, sc.gate.data(), pool);
  if (*cpu::activation_type_for(up.type) == gate_act) {
    cpu::matmul(up, e, sc.act_q, sc.up.data(), pool);
  } else {
    cpu::matmul_f32(up, e, x, rows, sc.up.data(), sc.tmp_q, pool);
  }
  cpu::swiglu(sc.gate.data(), sc.up.data(), rows * n_ff, sc.act.data());
  cpu::matmul_f32(down, e, sc.act.data(), rows, sc.down.data(), sc.tmp_q, pool);
}

}  // namespace

void moe_block(const MoeWeights& w, const MoeShape& s, const float* h, int64_t n, float* out, MoeScratch& sc,
               ThreadPool& pool, Profiler* profiler) {
  const int64_t d = s.n_embd;
  {
    ScopedProfile p(profiler, ProfileBlock::kMoeRouter);
    sc.router_logits.resize(static_cast<size_t>(n * s.n_expert));
    cpu::matmul_f32(w.router, 0, h, n, sc.router_logits.data(), sc.act_q, pool);
    route(s, n, sc);
  }
  {
    ScopedProfile experts_profile(profiler, ProfileBlock::kMoeExperts);

    std::memset(out, 0, static_cast<size_t>(n * d) * sizeof(float));
    // Group (token, slot) pairs by expert, then run each used expert once over its tokens.
    std::vector<std::vector<std::pair<int32_t, int32_t>>> by_expert(static_cast<size_t>(s.n_expert));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k < s.n_expert_used; ++k) {
        by_expert[static_cast<size_t>(sc.selected[static_cast<size_t>(t * s.n_expert_used + k)])].push_back(
            {static_cast<int32_t>(t), static_cast<int32_t>(k)});
      }
    }
    // Per-token expert outputs are accumulated in top-k order (as llama.cpp sums them), so
    // results do not depend on the grouping: stage them per (token, slot) first.
    std::vector<float> staged(static_cast<size_t>(n * s.n_expert_used * d));
    for (int64_t e = 0; e < s.n_expert; ++e) {
      const auto& items = by_expert[static_cast<size_t>(e)];
      if (items.empty()) continue;
      const int64_t rows = static_cast<int64_t>(items.size());
      sc.gathered.resize(static_cast<size_t>(rows * d));
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(sc.gathered.data() + r * d, h + items[static_cast<size_t>(r)].first * d, d * sizeof(float));
      }
      expert_ffn(w.gate_exps, w.up_exps, w.down_exps, e, sc.gathered.data(), rows, s.n_ff_exp, sc, pool);
      for (int64_t r = 0; r < rows; ++r) {
        const auto [t, k] = items[static_cast<size_t>(r)];
        std::memcpy(staged.data() + (t * s.n_expert_used + k) * d, sc.down.data() + r * d, d * sizeof(float));
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k < s.n_expert_used; ++k) {
        cpu::axpy(sc.selected_weight[static_cast<size_t>(t * s.n_expert_used + k)],
                  staged.data() + (t * s.n_expert_used + k) * d, d, out + t * d);
      }
    }
  }

  if (w.has_shared) {
    ScopedProfile p(profiler, ProfileBlock::kSharedExpert);
    sc.shared_gate.resize(static_cast<size_t>(n));
    cpu::matmul_f32(w.shared_gate_inp, 0, h, n, sc.shared_gate.data(), sc.tmp_q, pool);
    expert_ffn(w.gate_shexp, w.up_shexp, w.down_shexp, 0, h, n, s.n_ff_shexp, sc, pool);
    for (int64_t t = 0; t < n; ++t) {
      const float g = cpu::sigmoid(sc.shared_gate[static_cast<size_t>(t)]);
      cpu::axpy(g, sc.down.data() + t * d, d, out + t * d);
    }
  }
}

}  // namespace moetier
