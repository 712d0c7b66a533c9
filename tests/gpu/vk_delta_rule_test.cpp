// The fast GPU delta rule (vk::delta_rule_fast) against the exact GPU kernel (vk::delta_rule)
// and against the CPU loops (cpu::delta_rule_step + the gated RMSNorm), on the tiny, small,
// real Qwen3.6-35B-A3B (16 K / 32 V heads, d_state 128) and 4-V-per-K-head shapes, for
// decode (consecutive one-row dispatches carrying the state), short and long prompts (600
// rows: more than one loop-budget chunk), and other specializations (lanes, columns, stage
// sizes, d_state 256). Checked: the outputs y and the final state.
//
// Tolerance, derived rather than guessed. The fast kernel runs the same float operations as
// the references except (a) the order of the two length-d_k dot products (per lane
// sequential, then a shuffle butterfly, instead of one sequential sum), (b) FMA contraction
// (allowed in the fast kernel; the references round every product), (c) the norm's sum of
// squares (fp32 tree instead of float-float or double) and its reciprocal square root, and
// (d) Vulkan's exp (3 + 2|x| ulp) in decay, β and silu, against the CPU's (and against the
// exact kernel's, which may be compiled differently). Model: every rounding is an independent
// error of at most u·|value| (u = 2⁻²⁴), variance ≤ u²/3·value². Per token t, state column c
// (‖·‖: the column's 2-norm; ‖k‖ = ‖q‖ = 1):
//  * a dot product's rounding error has variance u²/3·Σ(its intermediate values²): the
//    products and partial sums. The two evaluations (the reference's sequential sum, the
//    fast kernel's lane sums and butterfly) differ with variance u²/3 times both sums, which
//    the CPU reference computes from its own data (dot_rounding_squares). The k product
//    reaches the state through δ: β²·that, along k;
//  * the update S + k·δ, fused or not: ≤ (2/3)·u²·(δ_c² + ‖S'_c‖²);
//  * decay and β, relative (4 + 8|g|)·u and (4 + 4|b|)·u (softplus and the sigmoid add a
//    few ulp to exp's): ε_d²·‖decay·S_c‖² and ε_β²·δ_c².
// Earlier differences e of the state do not grow: e ← decay·(I − β·k·kᵀ)·e + fresh, an
// operator of norm ≤ decay < 1, so the column's expected ‖e‖², V_c ← decay²·V_c + fresh,
// tracked along the CPU reference's data. It reaches o_c = (Sᵀq)_c·q_scale through e·q; q_t
// here is a random unit vector independent of the rounding history, so E(e·q)² = V_c/d_k,
// and Var(Δo_c) ≤ q_scale²·(V_c/d_k + the q product's term). The gated norm
// y_c = g_c·o_c, g_c = r·w_c·silu(z_c), r = (mean o² + eps)^-½, adds Δr/r ≤ ‖Δo‖/‖o‖
// (Cauchy–Schwarz) plus the fp32 sum of squares and rsqrt ((d_v/6 + 64)·u²), and silu's
// exp ((6 + 2|z|)·u relative); so E(Δy_c)² ≤ 3·[g_c²·Var(Δo_c) + y_c²·E(Δr/r)² + y_c²·ε_silu²].
// The NMSE Σ(a − b)²/Σb² (llama.cpp's test-backend-ops measure) is bounded by λ²·ΣE(Δy)²/Σy²
// with λ = 4 (the model is an expectation over many outputs, and rounding errors are not
// quite independent); the largest difference, relative to the largest |y|, by 12·max σ_c
// (bounded rounding errors make their sums sub-Gaussian: Hoeffding puts a 12σ outlier below
// 1e-10 per output); the final state's NMSE by λ²·Σ_c V_c / Σ_c ‖S_c‖². Vulkan's allowances
// for exp and rsqrt dominate the bounds (without them: y 4e-11..7e-11, state ~1e-13): a
// conforming device may use all of that error, lavapipe uses little of it.
// Measured on lavapipe (each case prints its values): y NMSE 2e-15..1.6e-13 against bounds
// 1e-10..2.5e-10; max-abs/max|y| ≤ 1.1e-6 against ≥ 2.6e-5; state NMSE ≤ 1.7e-14 against
// ≥ 4.8e-12. The exact kernel itself differs from the CPU by an NMSE of 2e-14..1e-13.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "cpu/delta_rule.h"
#include "cpu/ops.h"
#include "gpu/vulkan/vk_ops.h"

namespace moetier {
namespace {

constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2⁻²⁴
constexpr double kLambda = 4.0;                           // NMSE margin (squared)
constexpr double kMaxSigmas = 12.0;                       // max-abs margin

struct FastDeltaCase {
  const char* name;
  int64_t nk, nv, d, rows;
  bool decode = false;  // one dispatch per row, the state carried in its buffer
  vk::DeltaRuleFastTuning tuning{};
};

std::string case_name(const ::testing::TestParamInfo<FastDeltaCase>& info) { return info.param.name; }
void PrintTo(const FastDeltaCase& c, std::ostream* os) { *os << c.name; }

// The inputs of one sequence: conv rows [rows][q | k | v] with q, k L2-normalised per head
// (as the conv + l2_norm leave them), raw β and α [rows][nv], params dt_bias | A | norm,
// z [rows][nv·d] and the initial state [nv][d][d].
struct Inputs {
  int64_t nk, nv, d, rows, key_dim, value_dim, channels;
  std::vector<float> conv, beta, alpha, params, z, state;
};

Inputs make_inputs(int64_t nk, int64_t nv, int64_t d, int64_t rows) {
  Inputs in{.nk = nk, .nv = nv, .d = d, .rows = rows, .key_dim = nk * d, .value_dim = nv * d,
            .channels = 2 * nk * d + nv * d};
  in.conv = testing::random_normal(static_cast<size_t>(rows * in.channels), 31);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < 2 * nk; ++h) {
      float* x = &in.conv[static_cast<size_t>(t * in.channels + h * d)];
      double sq = 0;
      for (int64_t i = 0; i < d; ++i) sq += static_cast<double>(x[i]) * x[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(sq));
      for (int64_t i = 0; i < d; ++i) x[i] *= inv;
    }
  }
  in.beta = testing::random_normal(static_cast<size_t>(rows * nv), 32);
  in.alpha = testing::random_normal(static_cast<size_t>(rows * nv), 33);
  in.z = testing::random_normal(static_cast<size_t>(rows * in.value_dim), 34);
  in.state = testing::random_normal(static_cast<size_t>(nv * d * d), 35, 0.1f);
  in.params.resize(static_cast<size_t>(2 * nv + d));
  for (int64_t j = 0; j < nv; ++j) {
    in.params[static_cast<size_t>(j)] = 0.1f * static_cast<float>(j % 8);
    in.params[static_cast<size_t>(nv + j)] = -0.5f - 0.1f * static_cast<float>(j % 8);
  }
  for (int64_t c = 0; c < d; ++c) in.params[static_cast<size_t>(2 * nv + c)] = 1.0f + 0.01f * static_cast<float>(c);
  return in;
}

vk::DeltaRuleDispatch dispatch_for(const Inputs& in, int64_t row_begin, int64_t n_rows) {
  return {.n_rows = n_rows, .row_begin = row_begin, .dk = in.d, .dv = in.d, .n_k_heads = in.nk, .n_v_heads = in.nv,
          .channels = in.channels, .key_dim = in.key_dim, .value_dim = in.value_dim,
          .q_scale = 1.0f / std::sqrt(static_cast<float>(in.d)), .eps = 1e-6f};
}

// Σ of the squared intermediate values of a length-d_k dot product Σ_i x_i, x_i = scale·
// S[i][c]·w_i, per column c, in both orders: the reference's sequential partial sums, the
// fast kernel's per-lane partial sums (lane = i mod lanes) and its butterfly's sums, and the
// products (rounded by the reference, perhaps fused by the fast kernel: counted twice).
// Times u²/3, the variance of the difference of the two evaluations.
void dot_rounding_squares(const float* S, int64_t dk, int64_t dv, const float* w, float scale, int64_t lanes,
                          std::vector<double>& out) {
  std::vector<double> sequential(static_cast<size_t>(dv), 0.0), lane_sums(static_cast<size_t>(lanes * dv), 0.0);
  std::fill(out.begin(), out.end(), 0.0);
  for (int64_t i = 0; i < dk; ++i) {
    double* lane = &lane_sums[static_cast<size_t>((i % lanes) * dv)];
    for (int64_t c = 0; c < dv; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const double x = static_cast<double>(scale * S[i * dv + c]) * w[i];
      sequential[ci] += x;
      lane[c] += x;
      out[ci] += sequential[ci] * sequential[ci] + lane[c] * lane[c] + 2.0 * x * x;
    }
  }
  for (int64_t m = 1; m < lanes; m <<= 1) {  // butterfly level m: blocks of m lanes into 2m
    for (int64_t l = 0; l < lanes; l += 2 * m) {
      for (int64_t c = 0; c < dv; ++c) {
        double& node = lane_sums[static_cast<size_t>(l * dv + c)];
        node += lane_sums[static_cast<size_t>((l + m) * dv + c)];
        out[static_cast<size_t>(c)] += node * node;
      }
    }
  }
}

// The CPU loops of delta_net_block, and along them the error model of the header comment:
// the expected squared difference of each output (y_var) and of the final state (state_var,
// summed over columns). `lanes`: the fast kernel's lanes per column (its summation order).
struct Reference {
  std::vector<float> y, state;
  std::vector<double> y_var;
  double state_var = 0;
};

Reference cpu_reference(const Inputs& in, int64_t lanes) {
  const int64_t d = in.d, nv = in.nv;
  const double u2 = kUnitRoundoff * kUnitRoundoff;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  Reference ref{.y = std::vector<float>(static_cast<size_t>(in.rows * in.value_dim)), .state = in.state,
                .y_var = std::vector<double>(static_cast<size_t>(in.rows * in.value_dim))};
  std::vector<float> delta(static_cast<size_t>(d)), o(static_cast<size_t>(d));
  std::vector<double> col_var(static_cast<size_t>(d)), col_sq(static_cast<size_t>(d)), o_var(static_cast<size_t>(d)),
      k_dot(static_cast<size_t>(d)), q_dot(static_cast<size_t>(d));
  for (int64_t j = 0; j < nv; ++j) {
    float* S = &ref.state[static_cast<size_t>(j * d * d)];
    std::fill(col_var.begin(), col_var.end(), 0.0);
    auto column_squares = [&] {
      std::fill(col_sq.begin(), col_sq.end(), 0.0);
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t c = 0; c < d; ++c) col_sq[static_cast<size_t>(c)] += static_cast<double>(S[i * d + c]) * S[i * d + c];
      }
    };
    column_squares();
    for (int64_t t = 0; t < in.rows; ++t) {
      const float* row = &in.conv[static_cast<size_t>(t * in.channels)];
      const float *q = row + (j % in.nk) * d, *k = row + in.key_dim + (j % in.nk) * d;
      const float b_raw = in.beta[static_cast<size_t>(t * nv + j)];
      const float g = cpu::softplus(in.alpha[static_cast<size_t>(t * nv + j)] + in.params[static_cast<size_t>(j)]) *
                      in.params[static_cast<size_t>(nv + j)];
      const float b = cpu::sigmoid(b_raw), decay = std::exp(g);
      const std::vector<double> prev_sq = col_sq;
      dot_rounding_squares(S, d, d, k, decay, lanes, k_dot);
      cpu::delta_rule_step({.state = S, .d_k = d, .d_v = d, .q = q, .k = k, .v = row + 2 * in.key_dim + j * d,
                            .beta = b, .decay = decay, .q_scale = q_scale, .out = o.data(), .scratch = delta.data()});
      column_squares();
      dot_rounding_squares(S, d, d, q, 1.0f, lanes, q_dot);
      const double eps_d = (4.0 + 8.0 * std::fabs(g)) * kUnitRoundoff, eps_b = (4.0 + 4.0 * std::fabs(b_raw)) * kUnitRoundoff;
      const double dec2 = static_cast<double>(decay) * decay;
      double o_sq = 0, o_var_sum = 0;
      for (int64_t c = 0; c < d; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const double decayed_sq = dec2 * prev_sq[ci], delta_sq = static_cast<double>(delta[ci]) * delta[ci];
        const double fresh = static_cast<double>(b) * b * (u2 / 3.0) * k_dot[ci] + (2.0 / 3.0) * u2 * (delta_sq + col_sq[ci]) +
                             eps_d * eps_d * decayed_sq + eps_b * eps_b * delta_sq;
        col_var[ci] = dec2 * col_var[ci] + fresh;
        o_var[ci] = static_cast<double>(q_scale) * q_scale * (col_var[ci] / static_cast<double>(d) + (u2 / 3.0) * q_dot[ci]);
        o_sq += static_cast<double>(o[ci]) * o[ci];
        o_var_sum += o_var[ci];
      }
      const double rel_r_var = 2.0 * o_var_sum / std::max(o_sq, 1e-300) + 2.0 * (d / 6.0 + 64.0) * u2;
      const double r = 1.0 / std::sqrt(o_sq / static_cast<double>(d) + 1e-6);
      float* y = &ref.y[static_cast<size_t>(t * in.value_dim + j * d)];
      double* y_var = &ref.y_var[static_cast<size_t>(t * in.value_dim + j * d)];
      cpu::rms_norm(o.data(), &in.params[static_cast<size_t>(2 * nv)], d, 1e-6f, y);
      for (int64_t c = 0; c < d; ++c) {
        const double zc = in.z[static_cast<size_t>(t * in.value_dim + j * d + c)];
        const float gate = cpu::silu(static_cast<float>(zc));
        y[c] *= gate;
        const double gain = r * in.params[static_cast<size_t>(2 * nv + c)] * gate;
        const double eps_silu = (6.0 + 2.0 * std::fabs(zc)) * kUnitRoundoff;
        const double yc2 = static_cast<double>(y[c]) * y[c];
        y_var[c] = 3.0 * (gain * gain * o_var[static_cast<size_t>(c)] + yc2 * rel_r_var + yc2 * eps_silu * eps_silu);
      }
    }
    for (double v : col_var) ref.state_var += v;
  }
  return ref;
}

struct Comparison {
  double nmse = 0, max_abs = 0;
};
Comparison compare(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = static_cast<double>(got[i]) - want[i];
    err += diff * diff;
    norm += static_cast<double>(want[i]) * want[i];
    max_abs = std::max(max_abs, std::fabs(diff));
  }
  return {.nmse = err / std::max(norm, 1e-300), .max_abs = max_abs};
}

struct Gpu {
  vk::Device& dev;
  vk::BufferRef up(const std::vector<float>& v) { return *dev.create_buffer(v.data(), v.size() * 4, vk::MemoryUse::kScratch); }
  vk::BufferRef zeros(size_t n) { return *dev.create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch); }
  std::vector<float> down(const vk::BufferRef& b, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(dev.download(b, v.data(), n * sizeof(float)).is_ok());
    return v;
  }
};

class GpuFastDeltaRule : public ::testing::TestWithParam<FastDeltaCase> {};

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuFastDeltaRule,
    ::testing::Values(
        FastDeltaCase{"tiny_decode", 2, 4, 32, 4, true}, FastDeltaCase{"tiny_7", 2, 4, 32, 7},
        FastDeltaCase{"tiny_130", 2, 4, 32, 130}, FastDeltaCase{"tiny_600", 2, 4, 32, 600},
        FastDeltaCase{"small_decode", 4, 8, 64, 3, true}, FastDeltaCase{"small_7", 4, 8, 64, 7},
        FastDeltaCase{"small_130", 4, 8, 64, 130}, FastDeltaCase{"small_600", 4, 8, 64, 600},
        FastDeltaCase{"real35b_decode", 16, 32, 128, 3, true}, FastDeltaCase{"real35b_7", 16, 32, 128, 7},
        FastDeltaCase{"real35b_130", 16, 32, 128, 130}, FastDeltaCase{"real35b_600", 16, 32, 128, 600},
        FastDeltaCase{"four_v_per_k_decode", 4, 16, 128, 2, true}, FastDeltaCase{"four_v_per_k_7", 4, 16, 128, 7},
        FastDeltaCase{"four_v_per_k_130", 4, 16, 128, 130},
        // Other specializations: 8 lanes of 4 registers; 1 lane of 64 registers and narrow
        // workgroups; 8 lanes × 16 columns with 3-token stages and 50-row dispatches
        // (partial stages, chunks not a multiple of the stage); d_state 256.
        FastDeltaCase{"tiny_lanes8_130", 2, 4, 32, 130, false, {.lanes_per_column = 8}},
        FastDeltaCase{"small_lanes1_cols8_130", 4, 8, 64, 130, false, {.lanes_per_column = 1, .columns_per_group = 8}},
        FastDeltaCase{"real35b_lanes8_cols16_stage3_130", 16, 32, 128, 130, false,
                      {.lanes_per_column = 8, .columns_per_group = 16, .tokens_per_stage = 3, .max_rows_per_dispatch = 50}},
        FastDeltaCase{"d256_40", 1, 2, 256, 40}),
    case_name);

TEST_P(GpuFastDeltaRule, MatchesTheExactKernelAndTheCpuLoops) {
  GPU_OR_SKIP(dev);
  const FastDeltaCase& tc = GetParam();
  if (!dev->info().fast_kernels_supported()) {
    GTEST_SKIP() << "the device lacks what the fast kernels need";
  }
  const auto start = std::chrono::steady_clock::now();
  Gpu g{*dev};
  const Inputs in = make_inputs(tc.nk, tc.nv, tc.d, tc.rows);
  const auto plan = vk::plan_delta_rule_fast(dev->info(), dispatch_for(in, 0, tc.rows), tc.tuning);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  if (tc.rows == 600) {
    EXPECT_LT(plan->rows_per_dispatch, tc.rows) << "600 rows should take more than one dispatch";
  }

  const size_t n_y = static_cast<size_t>(tc.rows * in.value_dim);
  auto gconv = g.up(in.conv), gb = g.up(in.beta), ga = g.up(in.alpha), gp = g.up(in.params), gz = g.up(in.z);
  auto gs_exact = g.up(in.state), gs_fast = g.up(in.state), gy_exact = g.zeros(n_y), gy_fast = g.zeros(n_y);
  ASSERT_TRUE(vk::delta_rule(*dev, dispatch_for(in, 0, tc.rows), gconv, gb, ga, gp, gs_exact, gz, gy_exact).is_ok());
  if (tc.decode) {
    for (int64_t t = 0; t < tc.rows; ++t) {
      ASSERT_TRUE(vk::delta_rule_fast(*dev, dispatch_for(in, t, 1), gconv, gb, ga, gp, gs_fast, gz, gy_fast, tc.tuning).is_ok());
    }
  } else {
    ASSERT_TRUE(vk::delta_rule_fast(*dev, dispatch_for(in, 0, tc.rows), gconv, gb, ga, gp, gs_fast, gz, gy_fast, tc.tuning).is_ok());
  }
  const auto y_exact = g.down(gy_exact, n_y), y_fast = g.down(gy_fast, n_y);
  const auto s_exact = g.down(gs_exact, in.state.size()), s_fast = g.down(gs_fast, in.state.size());
  const Reference ref = cpu_reference(in, plan->lanes_per_column);

  double y_err = 0, y_norm = 0, max_sigma = 0, max_y = 0, s_norm = 0;
  for (size_t i = 0; i < n_y; ++i) {
    y_err += ref.y_var[i];
    y_norm += static_cast<double>(ref.y[i]) * ref.y[i];
    max_sigma = std::max(max_sigma, std::sqrt(ref.y_var[i]));
    max_y = std::max(max_y, static_cast<double>(std::fabs(ref.y[i])));
  }
  for (float v : ref.state) s_norm += static_cast<double>(v) * v;
  const double y_nmse_bound = kLambda * kLambda * y_err / y_norm, y_max_bound = kMaxSigmas * max_sigma / max_y;
  const double s_nmse_bound = kLambda * kLambda * ref.state_var / s_norm;

  const Comparison vs_exact = compare(y_fast, y_exact), vs_cpu = compare(y_fast, ref.y);
  const Comparison state_exact = compare(s_fast, s_exact), state_cpu = compare(s_fast, ref.state);
  const Comparison exact_vs_cpu = compare(y_exact, ref.y);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ measured ] %s (lanes %lld, cols %lld, stage %lld, %lld rows/dispatch): y NMSE vs exact %.2e, vs CPU "
              "%.2e (bound %.2e; exact kernel vs CPU %.2e); y max-abs/max|y| vs exact %.2e, vs CPU %.2e (bound %.2e); "
              "state NMSE vs exact %.2e, vs CPU %.2e (bound %.2e); %.2f s\n",
              tc.name, static_cast<long long>(plan->lanes_per_column), static_cast<long long>(plan->columns_per_group),
              static_cast<long long>(plan->tokens_per_stage), static_cast<long long>(plan->rows_per_dispatch),
              vs_exact.nmse, vs_cpu.nmse, y_nmse_bound, exact_vs_cpu.nmse, vs_exact.max_abs / max_y,
              vs_cpu.max_abs / max_y, y_max_bound, state_exact.nmse, state_cpu.nmse, s_nmse_bound, seconds);
  EXPECT_LE(vs_exact.nmse, y_nmse_bound);
  EXPECT_LE(vs_cpu.nmse, y_nmse_bound);
  EXPECT_LE(vs_exact.max_abs, y_max_bound * max_y);
  EXPECT_LE(vs_cpu.max_abs, y_max_bound * max_y);
  EXPECT_LE(state_exact.nmse, s_nmse_bound);
  EXPECT_LE(state_cpu.nmse, s_nmse_bound);
}

TEST(GpuFastDeltaRuleInput, BadShapesAndBuffersAreBadInput) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) {
    GTEST_SKIP() << "the device lacks what the fast kernels need";
  }
  const Inputs in = make_inputs(2, 4, 32, 2);
  const vk::DeltaRuleDispatch good = dispatch_for(in, 0, 2);
  ASSERT_TRUE(vk::plan_delta_rule_fast(dev->info(), good).is_ok());
  auto expect_bad = [&](vk::DeltaRuleDispatch d, vk::DeltaRuleFastTuning t, const char* what) {
    const auto plan = vk::plan_delta_rule_fast(dev->info(), d, t);
    ASSERT_FALSE(plan.is_ok()) << what;
    EXPECT_EQ(plan.status().kind(), ErrorKind::kBadInput) << what;
    EXPECT_NE(plan.status().message().find("fast delta rule"), std::string::npos) << plan.status().message();
  };
  auto with = [&](auto change) {
    vk::DeltaRuleDispatch d = good;
    change(d);
    return d;
  };
  expect_bad(with([](auto& d) { d.dk = d.dv = 512, d.key_dim = 2 * 512, d.value_dim = 4 * 512, d.channels = 8 * 512; }), {},
             "d_state 512");
  expect_bad(with([](auto& d) { d.key_dim += 1; }), {}, "key_dim");
  expect_bad(with([](auto& d) { d.value_dim = 3; }), {}, "value_dim");
  expect_bad(with([](auto& d) { d.channels -= 1; }), {}, "channels");
  expect_bad(with([](auto& d) { d.n_k_heads = 0; }), {}, "no K heads");
  expect_bad(good, {.lanes_per_column = 3}, "3 lanes");
  expect_bad(good, {.lanes_per_column = 16}, "16 lanes");
  expect_bad(good, {.columns_per_group = 5}, "5 columns of 32");
  expect_bad(good, {.tokens_per_stage = 100000}, "a stage beyond shared memory");

  // Buffers too small for the rows: an error, nothing recorded.
  Gpu g{*dev};
  auto gconv = g.up(in.conv), gb = g.up(in.beta), ga = g.up(in.alpha), gp = g.up(in.params), gz = g.up(in.z),
       gs = g.up(in.state), gy = g.zeros(static_cast<size_t>(2 * in.value_dim));
  const Status st = vk::delta_rule_fast(*dev, dispatch_for(in, 1, 2), gconv, gb, ga, gp, gs, gz, gy);
  EXPECT_EQ(st.kind(), ErrorKind::kBadInput) << st.message();
  EXPECT_TRUE(vk::delta_rule_fast(*dev, dispatch_for(in, 0, 2), gconv, gb, ga, gp, gs, gz, gy).is_ok());
}

}  // namespace
}  // namespace moetier
#endif
