// attention_block with the flash kernels (-fa on) against the exact path (-fa off) on the
// same weights, inputs and caches: a prompt that crosses micro-batches (three calls, the
// second shared with another sequence's prompt, the third crossing the 1024-key part
// boundary), then decode steps after 2,100 keys (two sequences together, then one alone,
// which splits its parts over the threads). Two shapes: qwen35moe-like (head dim 128,
// 4 query heads on 1 KV head, output gate, f16 cache) and qwen3moe-like (head dim 64,
// 4 heads on 4 KV heads, no gate, q8_0 K and q4_0 V).
//
// Bound: both paths see the same q, k, v (the projections are the same kernels), the same
// cache rows and the same f32 values of them, so per attention output element
//   |attn_flash − attn_exact| ≤ (B_flash + B_exact)·u·V
// with B_flash, B_exact from tests/kernel/flash_attention_test.cpp (per row: n keys, and S
// bounded by Cauchy–Schwarz, ‖q‖·max‖k‖·scale; V = max |v| in the cache). The output
// projection (F32 weights: double-lane dot products, one rounding) maps it to
//   |out_flash − out_exact| ≤ max_o Σ_i |W_oi| · max|Δattn| + 2u·|out|.
// With a Q8_0 K cache the flash scores use the quantized query q̂ (cpu/flash_attention.h:
// |q_i − q̂_i| ≤ δ_b per block), so each score moves by ≤ E = scale·Σ_i|k_i|·δ_b(i) ≤
// scale·max‖k‖·‖δ‖ (Cauchy–Schwarz) besides its rounding: every weight e^(s_j) by a factor
// within e^(±E), the normalised weights within e^(±2E), and the output, a convex combination
// moved by Σ_j |Δw_j|·|v_j − o| ≤ (e^(2E) − 1)·2V. The rounding bound takes S + E (q̂'s
// scores) and the integer scores' rounding term is below the float lanes' one.
// Memory: the threads' flash scratch after the deep decode is what it was after the first
// prompt (a function of head_dim and the task's vectors only), while the exact path's f32
// copy of the keys grew with the depth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/flash_attention.h"
#include "model/blocks/attention.h"
#include "state/sequence_state.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

constexpr double kU = 1.0 / (1 << 24);

struct Matrix {
  std::vector<float> data;
  cpu::WeightMatrix view;
};

Matrix f32_matrix(int64_t n_in, int64_t n_out, std::mt19937& rng, float scale) {
  Matrix m;
  std::normal_distribution<float> g(0.0f, scale);
  m.data.resize(static_cast<size_t>(n_in * n_out));
  for (auto& x : m.data) x = g(rng);
  m.view = {.type = DType::F32,
            .n_in = n_in,
            .n_out = n_out,
            .n_mat = 1,
            .row_bytes = n_in * static_cast<int64_t>(sizeof(float)),
            .data = reinterpret_cast<const uint8_t*>(m.data.data())};
  return m;
}

struct BlockSetup {
  AttentionShape shape;
  DType type_k, type_v;
};

struct Block {
  Matrix q, k, v, o;
  std::vector<float> q_norm, k_norm;
  AttentionWeights w;
  Block(const AttentionShape& s, std::mt19937& rng) {
    const float in_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
    q = f32_matrix(s.n_embd, s.n_head * s.head_dim * (s.output_gate ? 2 : 1), rng, in_scale);
    k = f32_matrix(s.n_embd, s.n_head_kv * s.head_dim, rng, in_scale);
    v = f32_matrix(s.n_embd, s.n_head_kv * s.head_dim, rng, in_scale);
    o = f32_matrix(s.n_head * s.head_dim, s.n_embd, rng, 1.0f / std::sqrt(static_cast<float>(s.n_head * s.head_dim)));
    std::uniform_real_distribution<float> norm_w(0.5f, 2.5f);  // peaked scores: ‖q‖·‖k‖/√d up to ~10
    q_norm.resize(static_cast<size_t>(s.head_dim));
    k_norm.resize(static_cast<size_t>(s.head_dim));
    for (auto& x : q_norm) x = norm_w(rng);
    for (auto& x : k_norm) x = norm_w(rng);
    w = {.q = q.view, .k = k.view, .v = v.view, .out = o.view, .q_norm = q_norm.data(), .k_norm = k_norm.data()};
  }
};

// One call: rows of these sequences (in order), their inputs, and the outputs of both paths.
struct Call {
  std::vector<std::pair<int, int64_t>> rows;  // (sequence, rows)
};

double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double{std::fabs(x)});
  return m;
}

// B_flash + B_exact of flash_attention_test.cpp in units of u·V.
double bound_units(double S, int64_t n) {
  const double T = std::min<double>(16, static_cast<double>((n + 63) / 64));
  const double P = static_cast<double>((n + cpu::kFlashPartKeys - 1) / cpu::kFlashPartKeys);
  const double flash = 2 * (6 * S + 2 + 2 * (T + P)) + 71 + 2 * T + 2 * P;
  const double exact = 2 * (6 * S + 3) + 2 * static_cast<double>(n) + 7;
  return flash + exact;
}

class AttentionBlockFlash : public ::testing::TestWithParam<BlockSetup> {};

TEST_P(AttentionBlockFlash, MatchesExactAcrossMicroBatchesAndDeepDecode) {
  const BlockSetup setup = GetParam();
  const AttentionShape& s = setup.shape;
  std::mt19937 rng(42);
  const Block block(s, rng);
  const int64_t hd = s.head_dim, q_width = s.n_head * hd, kv_width = s.n_head_kv * hd;
  const LayerStateSpec spec{.k_row_elems = kv_width, .v_row_elems = kv_width};
  const KvCacheOptions kv{.n_ctx = 2304, .type_k = setup.type_k, .type_v = setup.type_v};

  // A: 512 + 512 (with B's 64-token prompt) + 1100 rows, then A+B decode, then A alone ×2.
  const std::vector<Call> calls = {{{{0, 512}}},         {{{0, 512}, {1, 64}}}, {{{0, 1100}}},
                                   {{{0, 1}, {1, 1}}},   {{{0, 1}}},            {{{0, 1}}}};
  std::vector<std::vector<float>> inputs;
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const Call& c : calls) {
    int64_t n = 0;
    for (const auto& r : c.rows) n += r.second;
    inputs.emplace_back(static_cast<size_t>(n * s.n_embd));
    for (auto& x : inputs.back()) x = g(rng);
  }

  struct Run {
    std::vector<std::vector<float>> out, attn, q;
    std::vector<SequenceState> seqs;
    std::vector<size_t> flash_bytes_first, flash_bytes_last;
    size_t kv_f32_first = 0, kv_f32_last = 0;
  };
  ThreadPool pool(3);  // A alone: 1 task per KV head, fewer than the threads → split over parts
  const auto run = [&](bool flash) {
    Run r;
    for (int i = 0; i < 2; ++i) {
      auto seq = SequenceState::create({spec}, kv);
      EXPECT_TRUE(seq.is_ok());
      r.seqs.push_back(std::move(seq).value());
    }
    AttentionScratch scratch;
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      std::vector<SeqRows> rows;
      int64_t n = 0;
      for (const auto& [sid, count] : calls[ci].rows) {
        rows.push_back({.seq = &r.seqs[static_cast<size_t>(sid)], .row_begin = n, .n_rows = count});
        n += count;
      }
      std::vector<float> out(static_cast<size_t>(n * s.n_embd));
      attention_block(block.w, s, inputs[ci].data(), rows, 0, out.data(), scratch, pool, {.flash = flash});
      for (const SeqRows& sr : rows) sr.seq->set_n_past(sr.seq->n_past() + sr.n_rows);
      r.out.push_back(out);
      r.attn.emplace_back(scratch.attn.begin(), scratch.attn.begin() + n * q_width);
      r.q.emplace_back(scratch.q.begin(), scratch.q.begin() + n * q_width);
      std::vector<size_t> bytes;
      for (const auto& f : scratch.flash) bytes.push_back(f.bytes());
      if (ci == 0) {
        r.flash_bytes_first = bytes;
        r.kv_f32_first = scratch.kv_f32.size();
      }
      r.flash_bytes_last = bytes;
      r.kv_f32_last = scratch.kv_f32.size();
    }
    return r;
  };
  const Run exact = run(false);
  Run flash = run(true);

  // V and max ‖k‖ over both caches (identical in the two runs: same projections).
  double V = 0, k_norm_max = 0;
  std::vector<float> row(static_cast<size_t>(kv_width));
  for (SequenceState& seq : flash.seqs) {
    for (int64_t p = 0; p < seq.n_past(); ++p) {
      for (const bool is_v : {false, true}) {
        const DType t = is_v ? setup.type_v : setup.type_k;
        const uint8_t* src = is_v ? seq.v_row(0, p) : seq.k_row(0, p);
        if (t == DType::F32) {
          std::copy_n(reinterpret_cast<const float*>(src), kv_width, row.data());
        } else if (t == DType::F16) {
          fp16_to_f32_row(reinterpret_cast<const uint16_t*>(src), row.data(), kv_width);
        } else {
          type_ops(t)->dequantize_row(src, row.data(), kv_width);
        }
        for (int64_t h = 0; h < s.n_head_kv; ++h) {
          double norm = 0;
          for (int64_t i = 0; i < hd; ++i) {
            const double x = row[static_cast<size_t>(h * hd + i)];
            norm += x * x;
            if (is_v) V = std::max(V, std::fabs(x));
          }
          if (!is_v) k_norm_max = std::max(k_norm_max, std::sqrt(norm));
        }
      }
    }
  }
  double w_out_l1 = 0;  // max over output rows of Σ_i |W_oi|
  for (int64_t o = 0; o < s.n_embd; ++o) {
    double sum = 0;
    for (int64_t i = 0; i < q_width; ++i) sum += std::fabs(block.o.data[static_cast<size_t>(o * q_width + i)]);
    w_out_l1 = std::max(w_out_l1, sum);
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  double worst_attn = 0, worst_out = 0;  // measured / bound
  for (size_t ci = 0; ci < calls.size(); ++ci) {
    ASSERT_EQ(flash.q[ci], exact.q[ci]) << "call " << ci << ": the projections differ";
    int64_t t = 0;
    double attn_bound_max = 0;
    for (const auto& [sid, count] : calls[ci].rows) {
      for (int64_t i = 0; i < count; ++i, ++t) {
        // Keys row t saw: its sequence's rows before this call plus i + 1.
        int64_t before = 0;
        for (size_t cj = 0; cj < ci; ++cj) {
          for (const auto& [sj, cnt] : calls[cj].rows) before += sj == sid ? cnt : 0;
        }
        const int64_t n = before + i + 1;
        for (int64_t h = 0; h < s.n_head; ++h) {
          const size_t at = static_cast<size_t>((t * s.n_head + h) * hd);
          double qn = 0;
          for (int64_t e = 0; e < hd; ++e) qn += double{flash.q[ci][at + e]} * flash.q[ci][at + e];
          double E = 0;  // the quantized query's score error bound (0 unless K is Q8_0)
          if (setup.type_k == DType::Q8_0) {
            double delta2 = 0;  // ‖δ‖²
            for (int64_t b = 0; b < hd / kQK8_0; ++b) {
              double amax = 0;
              for (int64_t e = 0; e < kQK8_0; ++e) amax = std::max(amax, double{std::fabs(flash.q[ci][at + b * kQK8_0 + e])});
              const double d = amax / 127;
              const double delta = d * (0.5 + 254 * kU) + 127 * ((1.0 / 2048 + 2 * kU) * d + std::ldexp(1.0, -25));
              delta2 += kQK8_0 * delta * delta;
            }
            E = scale * k_norm_max * std::sqrt(delta2);
          }
          const double S = std::sqrt(qn) * k_norm_max * scale + E;
          const double bound = bound_units(S, n) * kU * V + std::expm1(2 * E) * 2 * V;
          attn_bound_max = std::max(attn_bound_max, bound);
          for (int64_t e = 0; e < hd; ++e) {
            const double d = std::fabs(double{flash.attn[ci][at + e]} - exact.attn[ci][at + e]);
            ASSERT_LE(d, bound) << "call " << ci << " row " << t << " head " << h << " keys " << n;
            worst_attn = std::max(worst_attn, d / bound);
          }
        }
      }
    }
    const double out_bound = w_out_l1 * attn_bound_max + 2 * kU * max_abs(exact.out[ci]);
    for (size_t i = 0; i < flash.out[ci].size(); ++i) {
      const double d = std::fabs(double{flash.out[ci][i]} - exact.out[ci][i]);
      ASSERT_LE(d, out_bound) << "call " << ci << " element " << i;
      worst_out = std::max(worst_out, d / out_bound);
    }
  }
  // Memory: the flash scratch did not grow from the first prompt to the deep decode; the
  // exact path's f32 copy of the keys did (it is [threads][2][depth][head_dim]).
  // (A thread may have taken no task in the first call: compare the largest.)
  EXPECT_EQ(*std::max_element(flash.flash_bytes_last.begin(), flash.flash_bytes_last.end()),
            *std::max_element(flash.flash_bytes_first.begin(), flash.flash_bytes_first.end()));
  // An item holds at most kFlashItemVectors vectors (or one row's heads) of all KV heads.
  for (size_t b : flash.flash_bytes_last) {
    EXPECT_LE(b, cpu::flash_scratch_bytes(hd, s.n_head_kv, std::max<int64_t>(cpu::kFlashItemVectors, s.n_head)));
  }
  EXPECT_GT(exact.kv_f32_last, exact.kv_f32_first);
  if (std::getenv("MOETIER_TEST_VERBOSE")) {
    std::fprintf(stderr, "hd %lld: max |Δattn| %.3g of bound, max |Δout| %.3g of bound; flash scratch %zu B/thread, "
                 "exact kv_f32 %zu → %zu floats\n",
                 static_cast<long long>(hd), worst_attn, worst_out, flash.flash_bytes_last[0], exact.kv_f32_first,
                 exact.kv_f32_last);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionBlockFlash,
    ::testing::Values(BlockSetup{.shape = {.n_embd = 256, .n_head = 4, .n_head_kv = 1, .head_dim = 128, .n_rot = 64,
                                      .rope_base = 1e7f, .rms_eps = 1e-6f, .output_gate = true},
                            .type_k = DType::F16,
                            .type_v = DType::F16},
                      BlockSetup{.shape = {.n_embd = 256, .n_head = 4, .n_head_kv = 4, .head_dim = 64, .n_rot = 64,
                                      .rope_base = 1e6f, .rms_eps = 1e-6f, .output_gate = false},
                            .type_k = DType::Q8_0,
                            .type_v = DType::Q4_0}),
    [](const ::testing::TestParamInfo<BlockSetup>& info) {
      return info.param.shape.output_gate ? "gated_hd128_f16" : "hd64_q8_q4";
    });

}  // namespace
}  // namespace moetier
