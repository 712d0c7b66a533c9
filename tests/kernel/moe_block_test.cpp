// The fused MoE expert path against a plain per-token reference built from the same
// kernels (matmul per token and expert, SwiGLU, weighted sum in top-k order, gated shared
// expert). Every dot product is the same kernel call on the same converted activations,
// and the sums are done in the same order, so the results must be bit-identical: for one
// token (decode), for batches where experts get uneven token counts (prefill), and for 1,
// 2 and 3 threads (work split must not change anything).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <tuple>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "model/blocks/moe.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  cpu::WeightMatrix view;
};

Matrix random_matrix(DType type, int64_t n_in, int64_t n_out, int64_t n_mat, std::mt19937& rng, float scale) {
  Matrix m;
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  m.bytes.resize(static_cast<size_t>(row_bytes * n_out * n_mat));
  std::normal_distribution<float> gauss(0.0f, scale);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out * n_mat; ++r) {
    for (auto& v : row) v = gauss(rng);
    type_ops(type)->quantize_row(row.data(), m.bytes.data() + r * row_bytes, n_in);
  }
  m.view = {.type = type, .n_in = n_in, .n_out = n_out, .n_mat = n_mat, .row_bytes = row_bytes, .data = m.bytes.data()};
  return m;
}

struct Fixture {
  MoeShape shape{.n_embd = 256, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .n_ff_shexp = 512};
  Matrix router, gate, up, down, shared_gate_inp, gate_sh, up_sh, down_sh;
  MoeWeights w;
  // Routed experts' types: gate, up, down.
  explicit Fixture(std::mt19937& rng, std::array<DType, 3> routed = {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const auto& s = shape;
    router = random_matrix(DType::F32, s.n_embd, s.n_expert, 1, rng, 0.5f);
    gate = random_matrix(routed[0], s.n_embd, s.n_ff_exp, s.n_expert, rng, 0.1f);
    up = random_matrix(routed[1], s.n_embd, s.n_ff_exp, s.n_expert, rng, 0.1f);
    down = random_matrix(routed[2], s.n_ff_exp, s.n_embd, s.n_expert, rng, 0.1f);
    shared_gate_inp = random_matrix(DType::F32, s.n_embd, 1, 1, rng, 0.1f);
    // Q8_0 shared expert: another activation type than the routed experts' Q8_K.
    gate_sh = random_matrix(DType::Q8_0, s.n_embd, s.n_ff_shexp, 1, rng, 0.1f);
    up_sh = random_matrix(DType::Q8_0, s.n_embd, s.n_ff_shexp, 1, rng, 0.1f);
    down_sh = random_matrix(DType::Q8_0, s.n_ff_shexp, s.n_embd, 1, rng, 0.1f);
    w = MoeWeights{.router = router.view,
                   .gate_exps = gate.view,
                   .up_exps = up.view,
                   .down_exps = down.view,
                   .has_shared = true,
                   .shared_gate_inp = shared_gate_inp.view,
                   .gate_shexp = gate_sh.view,
                   .up_shexp = up_sh.view,
                   .down_shexp = down_sh.view};
  }
};

// SwiGLU FFN of one token through matrix `mat` of the stacks.
std::vector<float> ffn_one(const cpu::WeightMatrix& gate, const cpu::WeightMatrix& up, const cpu::WeightMatrix& down,
                           int64_t mat, const float* x, ThreadPool& pool) {
  cpu::QuantizedActivations q;
  std::vector<float> g(static_cast<size_t>(gate.n_out)), u(g.size()), a(g.size()), y(static_cast<size_t>(down.n_out));
  cpu::matmul_f32(gate, mat, x, 1, g.data(), q, pool);
  cpu::matmul_f32(up, mat, x, 1, u.data(), q, pool);
  cpu::swiglu(g.data(), u.data(), gate.n_out, a.data());
  cpu::matmul_f32(down, mat, a.data(), 1, y.data(), q, pool);
  return y;
}

std::vector<float> reference_moe(const Fixture& f, const std::vector<float>& h, int64_t n, ThreadPool& pool) {
  const auto& s = f.shape;
  std::vector<float> out(static_cast<size_t>(n * s.n_embd), 0.0f);
  cpu::QuantizedActivations q;
  for (int64_t t = 0; t < n; ++t) {
    const float* x = h.data() + t * s.n_embd;
    std::vector<float> p(static_cast<size_t>(s.n_expert));
    cpu::matmul_f32(f.w.router, 0, x, 1, p.data(), q, pool);
    cpu::softmax(p.data(), s.n_expert);
    std::vector<int32_t> order(static_cast<size_t>(s.n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    float sum = 0;
    for (int64_t k = 0; k < s.n_expert_used; ++k) sum += p[order[k]];
    sum = std::max(sum, 6.1035e-5f);
    float* o = out.data() + t * s.n_embd;
    for (int64_t k = 0; k < s.n_expert_used; ++k) {
      const auto y = ffn_one(f.w.gate_exps, f.w.up_exps, f.w.down_exps, order[k], x, pool);
      cpu::axpy(p[order[k]] / sum, y.data(), s.n_embd, o);
    }
    float g = 0;
    cpu::matmul_f32(f.w.shared_gate_inp, 0, x, 1, &g, q, pool);
    const auto y = ffn_one(f.w.gate_shexp, f.w.up_shexp, f.w.down_shexp, 0, x, pool);
    cpu::axpy(cpu::sigmoid(g), y.data(), s.n_embd, o);
  }
  return out;
}

// Routed experts in K-quants (Q8_K activations) and in Q8_0/IQ4_XS (the tile kernels'
// Q8_0 block terms, and a gate and up of different activation types); with 40 tokens most
// experts get ≥ 8 tokens, so the tile kernels run for routed and shared experts alike.
class MoeBlockTypes : public ::testing::TestWithParam<std::array<DType, 3>> {};

TEST_P(MoeBlockTypes, FusedPathEqualsPerTokenReferenceForAnyBatchAndThreadCount) {
  std::mt19937 rng(11);
  Fixture f(rng, GetParam());
  ThreadPool one(1);
  for (int64_t n : {1, 2, 7, 40}) {
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> h(static_cast<size_t>(n * f.shape.n_embd));
    for (auto& v : h) v = gauss(rng);
    // Make two tokens identical so some experts get repeated tokens, and skew the batch
    // toward few experts by scaling one direction (uneven groups).
    if (n >= 2) std::copy(h.begin(), h.begin() + f.shape.n_embd, h.begin() + f.shape.n_embd);
    const auto expected = reference_moe(f, h, n, one);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      MoeScratch scratch;
      std::vector<float> out(h.size(), -1.0f);
      for (int rep = 0; rep < 2; ++rep) {  // the second call reuses warm scratch
        moe_block(f.w, f.shape, h.data(), n, out.data(), scratch, pool, nullptr);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_EQ(out[i], expected[i]) << "n=" << n << " threads=" << threads << " rep=" << rep << " i=" << i;
        }
      }
    }
  }
}

// Routed experts repacked into the interleaved layout (cpu/interleave.h, as the loader does
// with -nr off) give the per-token reference's bits too: decode (1 token: the one-token x8
// kernel), a few tokens (2 and 7: below the per-call tile's threshold, where the row layout
// uses the multi-row kernels) and a prompt (40), on 1-3 threads, K-quants and IQ4_XS.
TEST(MoeBlock, InterleavedExpertsEqualTheReference) {
  const cpu::DotKernel* k = cpu::best_dot_kernel(DType::Q4_K, cpu_features());
  if (k == nullptr || k->tile_x8 == nullptr) GTEST_SKIP() << "no interleaved kernels on this CPU (needs AVX-VNNI)";
  for (std::array<DType, 3> types : {std::array<DType, 3>{DType::Q4_K, DType::Q5_K, DType::Q6_K},
                                     std::array<DType, 3>{DType::IQ4_XS, DType::IQ4_XS, DType::Q4_K}}) {
    std::mt19937 rng(23);
    Fixture f(rng, types);
    ThreadPool one(1);
    // The interleaved copy of the routed stacks whose types have the kernel on this CPU (gate
    // and up together, as the loader does); the reference keeps reading the rows.
    auto has_x8 = [](DType t) {
      const cpu::DotKernel* kt = cpu::best_dot_kernel(t, cpu_features());
      return kt != nullptr && kt->tile_x8 != nullptr;
    };
    Fixture x8 = f;
    const bool pair = has_x8(types[0]) && has_x8(types[1]);
    int n_interleaved = 0;
    for (auto [m, view, on] : {std::tuple{&x8.gate, &x8.w.gate_exps, pair}, std::tuple{&x8.up, &x8.w.up_exps, pair},
                               std::tuple{&x8.down, &x8.w.down_exps, has_x8(types[2])}}) {
      view->data = m->bytes.data();
      if (!on) continue;
      cpu::interleave_in_place(m->view.type, m->view.n_in, m->view.n_out * m->view.n_mat, m->bytes.data(), 2);
      view->layout = cpu::RowLayout::kInterleaved8;
      ++n_interleaved;
    }
    ASSERT_GT(n_interleaved, 0);
    for (int64_t n : {1, 2, 7, 40}) {
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      std::vector<float> h(static_cast<size_t>(n * f.shape.n_embd));
      for (auto& v : h) v = gauss(rng);
      const auto expected = reference_moe(f, h, n, one);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        MoeScratch scratch;
        std::vector<float> out(h.size(), -1.0f);
        moe_block(x8.w, x8.shape, h.data(), n, out.data(), scratch, pool, nullptr);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_EQ(out[i], expected[i]) << dtype_name(types[0]) << " n=" << n << " threads=" << threads << " i=" << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Routed, MoeBlockTypes,
                         ::testing::Values(std::array<DType, 3>{DType::Q4_K, DType::Q5_K, DType::Q6_K},
                                           std::array<DType, 3>{DType::Q8_0, DType::IQ4_XS, DType::Q8_0}));

TEST(MoeBlock, WithoutSharedExpertOnlyRoutedExpertsContribute) {
  std::mt19937 rng(5);
  Fixture f(rng);
  f.w.has_shared = false;
  ThreadPool pool(2);
  MoeScratch scratch;
  const int64_t n = 3;
  std::vector<float> h(static_cast<size_t>(n * f.shape.n_embd), 0.25f), out(h.size());
  moe_block(f.w, f.shape, h.data(), n, out.data(), scratch, pool, nullptr);
  MoeWeights with_shared = f.w;
  with_shared.has_shared = true;
  std::vector<float> out_shared(h.size());
  MoeScratch scratch2;
  moe_block(with_shared, f.shape, h.data(), n, out_shared.data(), scratch2, pool, nullptr);
  // The difference is exactly the gated shared expert of each token.
  ThreadPool one(1);
  float gate = 0;
  cpu::QuantizedActivations q;
  cpu::matmul_f32(f.w.shared_gate_inp, 0, h.data(), 1, &gate, q, one);
  const auto y = ffn_one(f.w.gate_shexp, f.w.up_shexp, f.w.down_shexp, 0, h.data(), one);
  for (int64_t i = 0; i < f.shape.n_embd; ++i) {
    EXPECT_EQ(out_shared[static_cast<size_t>(i)], out[static_cast<size_t>(i)] + cpu::sigmoid(gate) * y[static_cast<size_t>(i)]);
  }
}

// The work plan covers every row of every group once, in pieces of whole 8-row groups, and
// lists the costliest groups first.
void expect_plan_covers(std::vector<MoeItemGroup> groups, bool down, int n_threads) {
  std::vector<MoeItemGroup> planned = groups;
  std::vector<MoeWorkItem> items;
  moe_plan_items(planned, down, n_threads, items);
  std::vector<int64_t> next_row(groups.size(), 0);
  int64_t last_tokens = INT64_MAX;
  for (const MoeWorkItem& it : items) {
    const auto g = std::find_if(groups.begin(), groups.end(), [&](const MoeItemGroup& x) { return x.group == it.group; });
    ASSERT_NE(g, groups.end());
    const size_t gi = static_cast<size_t>(g - groups.begin());
    EXPECT_EQ(it.row_begin, next_row[gi]) << "group " << it.group;
    EXPECT_GT(it.row_end, it.row_begin);
    EXPECT_TRUE(it.row_end % 8 == 0 || it.row_end == g->n_out);
    next_row[gi] = it.row_end;
    EXPECT_LE(g->tokens, last_tokens) << "costliest first";
    last_tokens = g->tokens;
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) EXPECT_EQ(next_row[gi], groups[gi].n_out) << "group " << groups[gi].group;
}

TEST(MoePlan, EveryRowOnceCostliestFirst) {
  for (const int threads : {1, 2, 3, 8, 16}) {
    for (const bool down : {false, true}) {
      const int64_t n_out = down ? 2048 : 512;
      // Decode: eight routed experts and the shared expert, one token each.
      std::vector<MoeItemGroup> decode;
      for (int32_t g = 0; g < 9; ++g) decode.push_back({.group = g, .tokens = 1, .n_out = n_out});
      expect_plan_covers(decode, down, threads);
      // A small step: uneven token counts in expert order, the shared expert (all tokens) last.
      std::vector<MoeItemGroup> step;
      const int64_t tokens[] = {1, 3, 1, 1, 2, 1, 4, 1, 1, 1, 2};
      for (int32_t g = 0; g < 11; ++g) step.push_back({.group = g, .tokens = tokens[g], .n_out = n_out});
      step.push_back({.group = 11, .tokens = 16, .n_out = n_out});
      expect_plan_covers(step, down, threads);
    }
  }
}

TEST(MoePlan, OneTokenGroupsWholeFirstShortLast) {
  // Decode on 2 threads: nine matrices of 512 gate/up rows. The first pieces are whole
  // matrices; the last pieces are the short ones, and the last of all is one short piece.
  std::vector<MoeItemGroup> decode;
  for (int32_t g = 0; g < 9; ++g) decode.push_back({.group = g, .tokens = 1, .n_out = 512});
  std::vector<MoeWorkItem> items;
  moe_plan_items(decode, /*down=*/false, 2, items);
  ASSERT_GE(items.size(), 9u);
  EXPECT_EQ(items.front().row_begin, 0);
  EXPECT_EQ(items.front().row_end, 512);
  const int64_t fine = moe_item_rows(1, false);
  EXPECT_EQ(items.back().row_end - items.back().row_begin, fine);
  bool cut = false;  // once a matrix is cut short, no whole matrix follows
  for (const MoeWorkItem& it : items) {
    const bool whole = it.row_begin == 0 && it.row_end == 512;
    EXPECT_FALSE(cut && whole) << "group " << it.group;
    cut = cut || !whole;
  }
  EXPECT_TRUE(cut);
  // Groups of several tokens are cut in their short pieces only.
  std::vector<MoeItemGroup> shared = {{.group = 0, .tokens = 4, .n_out = 512}};
  moe_plan_items(shared, /*down=*/false, 2, items);
  EXPECT_EQ(static_cast<int64_t>(items.size()), 512 / moe_item_rows(4, false));
}

}  // namespace
}  // namespace moetier
