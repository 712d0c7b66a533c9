// The delta-rule step: the build serving every tier this CPU runs is bit-identical to the
// scalar build (element-wise arithmetic, no FMA contraction), and the scalar build follows
// the formulas (checked against a double-precision evaluation with a derived bound).
#include "cpu/delta_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/cpu_features.h"

namespace moetier::cpu {
namespace {

struct Case {
  int64_t dk, dv;
  std::vector<float> state, q, k, v;
};

Case make_case(int64_t dk, int64_t dv, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  Case c{dk, dv, std::vector<float>(static_cast<size_t>(dk * dv)), std::vector<float>(static_cast<size_t>(dk)),
         std::vector<float>(static_cast<size_t>(dk)), std::vector<float>(static_cast<size_t>(dv))};
  for (auto& x : c.state) x = 0.1f * g(rng);
  for (auto* vec : {&c.q, &c.k}) {
    double norm = 0;
    for (auto& x : *vec) {
      x = g(rng);
      norm += double{x} * x;
    }
    for (auto& x : *vec) x = static_cast<float>(x / std::sqrt(norm));
  }
  for (auto& x : c.v) x = g(rng);
  return c;
}

const DeltaRuleKernels& scalar_build() { return delta_rule_kernels(IsaTier::kScalar); }

// The tiers this CPU runs, each with the build that serves it.
std::vector<const DeltaRuleKernels*> builds_on_this_cpu() {
  std::vector<const DeltaRuleKernels*> builds;
  for (IsaTier t : kIsaTiers) {
    if (isa_tier_runs_on(t, cpu_features())) builds.push_back(&delta_rule_kernels(t));
  }
  return builds;
}

void expect_bit_identical_to_scalar(void (*step)(const DeltaRuleStep&), IsaTier build) {
  std::mt19937 rng(3);
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {64, 37}, {5, 129}}) {
    Case a = make_case(dk, dv, rng), b = a;
    std::vector<float> out_a(static_cast<size_t>(dv)), out_b(out_a.size()), tmp(out_a.size());
    for (int token = 0; token < 3; ++token) {  // state carries over between tokens
      scalar_build().step({.state = a.state.data(), .d_k = dk, .d_v = dv, .q = a.q.data(), .k = a.k.data(),
                           .v = a.v.data(), .beta = 0.7f, .decay = 0.93f, .q_scale = 0.088f,
                           .out = out_a.data(), .scratch = tmp.data()});
      step({.state = b.state.data(), .d_k = dk, .d_v = dv, .q = b.q.data(), .k = b.k.data(), .v = b.v.data(),
            .beta = 0.7f, .decay = 0.93f, .q_scale = 0.088f, .out = out_b.data(), .scratch = tmp.data()});
      ASSERT_EQ(out_a, out_b) << isa_tier_name(build) << " " << dk << "x" << dv << " token " << token;
      ASSERT_EQ(a.state, b.state) << isa_tier_name(build) << " " << dk << "x" << dv << " token " << token;
    }
  }
}

TEST(DeltaRule, EveryTierIsBitIdenticalToScalar) {
  for (const DeltaRuleKernels* k : builds_on_this_cpu()) expect_bit_identical_to_scalar(k->step, k->tier);
}

// AVX-VNNI has no build of its own: the fallback (AVX2's) serves it; the dispatch uses the
// build of the CPU's tier.
TEST(DeltaRule, TiersServedByTheirBuildOrFallback) {
  EXPECT_EQ(delta_rule_kernels(IsaTier::kScalar).tier, IsaTier::kScalar);
  EXPECT_EQ(delta_rule_kernels(IsaTier::kAvx2).tier, IsaTier::kAvx2);
  EXPECT_EQ(delta_rule_kernels(IsaTier::kAvxVnni).tier, IsaTier::kAvx2);
  EXPECT_EQ(delta_rule_kernels(IsaTier::kAvx512).tier, IsaTier::kAvx512);
}

// A run of tokens (delta_rule_tokens: fused passes, column blocks in registers) against the
// scalar step per token: the same outputs and final state bit for bit, for every tier's build,
// run lengths 1..9, shapes with whole column blocks (128 × 128, 64 × 64 at every width) and
// without (64 × 40 and 5 × 129: the step-by-step fallback), tokens at a stride as in a
// micro-batch's rows, distinct β and decay per token; and with records for the rollback
// journal, replays that give back the steps' state after each token.
void expect_tokens_equal_steps(void (*tokens)(const DeltaRuleTokens&), const char* isa) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(0.05f, 0.99f);
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {64, 64}, {64, 40}, {5, 129}}) {
    for (int64_t n : {1, 2, 3, 9}) {
      const int64_t stride = 2 * dk + dv + 3;  // q | k | v | padding per token row
      std::vector<float> rows(static_cast<size_t>(n * stride));
      std::vector<float> beta(static_cast<size_t>(n)), decay(static_cast<size_t>(n));
      Case base = make_case(dk, dv, rng);
      for (int64_t t = 0; t < n; ++t) {
        const Case c = make_case(dk, dv, rng);
        std::copy(c.q.begin(), c.q.end(), rows.begin() + t * stride);
        std::copy(c.k.begin(), c.k.end(), rows.begin() + t * stride + dk);
        std::copy(c.v.begin(), c.v.end(), rows.begin() + t * stride + 2 * dk);
        beta[static_cast<size_t>(t)] = unit(rng);
        decay[static_cast<size_t>(t)] = unit(rng);
      }
      std::vector<float> state_ref = base.state, state_run = base.state;
      std::vector<float> out_ref(static_cast<size_t>(n * dv)), out_run(out_ref.size(), -1.0f);
      std::vector<float> tmp(static_cast<size_t>(2 * dv));
      for (int64_t t = 0; t < n; ++t) {
        const float* row = rows.data() + t * stride;
        scalar_build().step({.state = state_ref.data(), .d_k = dk, .d_v = dv, .q = row, .k = row + dk,
                             .v = row + 2 * dk, .beta = beta[static_cast<size_t>(t)],
                             .decay = decay[static_cast<size_t>(t)], .q_scale = 0.088f,
                             .out = out_ref.data() + t * dv, .scratch = tmp.data()});
      }
      tokens({.state = state_run.data(), .d_k = dk, .d_v = dv, .n_tokens = n, .q = rows.data(), .k = rows.data() + dk,
              .v = rows.data() + 2 * dk, .stride = stride, .beta = beta.data(), .decay = decay.data(), .q_scale = 0.088f,
              .out = out_run.data(), .out_stride = dv, .scratch = tmp.data()});
      ASSERT_EQ(out_run, out_ref) << isa << " " << dk << "x" << dv << " n=" << n;
      ASSERT_EQ(state_run, state_ref) << isa << " " << dk << "x" << dv << " n=" << n;

      // With records (a speculative verify's journal): the same outputs and final state; the
      // records of tokens 0..t applied to the first state give the steps' state after token t
      // (delta_rule_replay, and fused into a run's sweep); the records lie record_stride apart
      // with room between (heads of a layer), written nowhere else.
      const int64_t rec = delta_rule_record_elems(dk, dv), rec_stride = rec + 5;
      std::vector<float> records(static_cast<size_t>(n * rec_stride + 5), -3.0f), state_j = base.state,
          out_j(out_ref.size());
      tokens({.state = state_j.data(), .d_k = dk, .d_v = dv, .n_tokens = n, .q = rows.data(), .k = rows.data() + dk,
              .v = rows.data() + 2 * dk, .stride = stride, .beta = beta.data(), .decay = decay.data(), .q_scale = 0.088f,
              .out = out_j.data(), .out_stride = dv, .scratch = tmp.data(), .record = records.data(), .n_record = n,
              .record_stride = rec_stride});
      ASSERT_EQ(out_j, out_ref) << isa << " records " << dk << "x" << dv << " n=" << n;
      ASSERT_EQ(state_j, state_ref) << isa << " records " << dk << "x" << dv << " n=" << n;
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t e = rec; e < rec_stride; ++e) {
          ASSERT_EQ(records[static_cast<size_t>(t * rec_stride + e)], -3.0f) << isa << " wrote between records, n=" << n;
        }
      }
      std::vector<float> state_steps = base.state, out_t(static_cast<size_t>(dv));
      for (int64_t t = 0; t < n; ++t) {
        const float* row = rows.data() + t * stride;
        scalar_build().step({.state = state_steps.data(), .d_k = dk, .d_v = dv, .q = row, .k = row + dk,
                             .v = row + 2 * dk, .beta = beta[static_cast<size_t>(t)],
                             .decay = decay[static_cast<size_t>(t)], .q_scale = 0.088f, .out = out_t.data(),
                             .scratch = tmp.data()});
        std::vector<float> replayed(base.state.size(), -7.0f);
        delta_rule_replay({.source = base.state.data(), .state = replayed.data(), .d_k = dk, .d_v = dv,
                           .records = records.data(), .n = t + 1, .record_stride = rec_stride});
        ASSERT_EQ(replayed, state_steps) << isa << " replay of " << t + 1 << " records " << dk << "x" << dv << " n=" << n;
        // A run of the next token from the first state with tokens 0..t pending: out of place
        // (the source written back with the replayed state, or left as it was), and in place.
        if (t + 1 >= n) continue;
        std::vector<float> steps_next = state_steps, out_next(static_cast<size_t>(dv));
        const float* next = rows.data() + (t + 1) * stride;
        scalar_build().step({.state = steps_next.data(), .d_k = dk, .d_v = dv, .q = next, .k = next + dk,
                             .v = next + 2 * dk, .beta = beta[static_cast<size_t>(t + 1)],
                             .decay = decay[static_cast<size_t>(t + 1)], .q_scale = 0.088f, .out = out_next.data(),
                             .scratch = tmp.data()});
        // Modes: out of place (to a 64-byte aligned place: its final state streamed; then to
        // one 4 bytes off); with write-back; in place.
        for (const int mode : {0, 3, 1, 2}) {
          std::vector<float> source = base.state, dest_buf(base.state.size() + 32, -9.0f), out_r(static_cast<size_t>(dv));
          float* aligned = dest_buf.data();
          while (reinterpret_cast<uintptr_t>(aligned) % 64 != 0) ++aligned;
          const std::span<float> dest(aligned + (mode == 3 ? 1 : 0), base.state.size());
          float* into = mode == 2 ? source.data() : dest.data();
          tokens({.state = into, .source = source.data(), .d_k = dk, .d_v = dv, .n_tokens = 1, .q = next, .k = next + dk,
                  .v = next + 2 * dk, .stride = stride, .beta = beta.data() + t + 1, .decay = decay.data() + t + 1,
                  .q_scale = 0.088f, .out = out_r.data(), .out_stride = dv, .scratch = tmp.data(), .replay = records.data(),
                  .n_replay = t + 1, .write_back_replay = mode == 1, .record_stride = rec_stride});
          const std::string what = std::string(isa) + " pending " + std::to_string(t + 1) + ", mode " +
                                   std::to_string(mode) + " " + std::to_string(dk) + "x" + std::to_string(dv);
          ASSERT_EQ(out_r, out_next) << what;
          ASSERT_EQ(mode == 2 ? source : std::vector<float>(dest.begin(), dest.end()), steps_next) << what;
          if (mode == 0 || mode == 3) {
            ASSERT_EQ(source, base.state) << what << ": the source changed";
          }
          if (mode == 1) {
            ASSERT_EQ(source, state_steps) << what << ": the source is not the replayed state";
          }
        }
      }
    }
  }
}

TEST(DeltaRule, TokenRunsEqualStepsBitForBit) {
  for (const DeltaRuleKernels* k : builds_on_this_cpu()) {
    expect_tokens_equal_steps(k->tokens, std::string(isa_tier_name(k->tier)).c_str());
  }
  expect_tokens_equal_steps(delta_rule_tokens, "dispatch");
}

TEST(DeltaRule, FollowsTheFormulasWithinFloatRounding) {
  // Reference in double. Each output is a sum of d_k products of values bounded by the
  // inputs; float evaluation with ≤ 2·d_k + 4 roundings per element keeps the error below
  // (2·d_k + 4)·2^-24·Σ|terms|, Σ|terms| ≤ d_k·max|S|·max|q|: we use that bound.
  std::mt19937 rng(9);
  const int64_t dk = 64, dv = 48;
  Case c = make_case(dk, dv, rng);
  std::vector<double> S(c.state.begin(), c.state.end());
  const double beta = 0.6, decay = 0.9, q_scale = 0.125;
  std::vector<float> out(static_cast<size_t>(dv)), tmp(out.size());
  delta_rule_step({.state = c.state.data(), .d_k = dk, .d_v = dv, .q = c.q.data(), .k = c.k.data(), .v = c.v.data(),
                   .beta = 0.6f, .decay = 0.9f, .q_scale = 0.125f, .out = out.data(), .scratch = tmp.data()});
  for (auto& x : S) x *= decay;
  double max_s = 0;
  for (int64_t col = 0; col < dv; ++col) {
    double sk = 0;
    for (int64_t i = 0; i < dk; ++i) sk += S[i * dv + col] * c.k[i];
    const double delta = beta * (c.v[col] - sk);
    for (int64_t i = 0; i < dk; ++i) S[i * dv + col] += c.k[i] * delta;
  }
  for (double x : S) max_s = std::max(max_s, std::fabs(x));
  for (int64_t col = 0; col < dv; ++col) {
    double o = 0;
    for (int64_t i = 0; i < dk; ++i) o += S[i * dv + col] * c.q[i];
    o *= q_scale;
    const double bound = (2.0 * dk + 4) * std::ldexp(1.0, -24) * dk * (max_s + 1.0) * 1.0;
    EXPECT_NEAR(out[static_cast<size_t>(col)], o, bound) << col;
    for (int64_t i = 0; i < dk; ++i) {
      EXPECT_NEAR(c.state[static_cast<size_t>(i * dv + col)], S[i * dv + col], bound) << i << "," << col;
    }
  }
}

}  // namespace
}  // namespace moetier::cpu
