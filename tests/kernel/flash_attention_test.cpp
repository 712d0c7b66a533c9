// The CPU flash-attention kernels (cpu/flash_attention.h) against a double-precision
// evaluation of the same attention and against the exact path's arithmetic
// (model/blocks/attention.cpp with -fa off), for head dims 64/128/256, GQA groups 1/2/8,
// KV caches f32/f16/q8_0/q4_0, with and without the output gate, for prompt rows (one
// micro-batch from position 0, and one that crosses a 1024-key part boundary) and decode
// rows after thousands of keys. Plus the structural promises: every tier's build is
// bit-identical to the scalar one, a task split over parts equals the whole task, a
// row's result does not depend on the rows and heads it shares a task with, and the
// per-thread scratch does not grow with the depth.
//
// Tolerances (u = 2^-24, one float rounding; V = max |v_ji| over the keys a query sees;
// S = max |s_j| its scores; n keys; T = min(⌈n/64⌉, 16) tiles in a part; P = ⌈n/1024⌉ parts).
// The reference o* = Σ_j w_j v_j / Σ_j w_j with w_j = e^(s_j) in double from the same
// dequantized K/V, the same float q and the same float scale. Every dequantized value is
// exact in both (same conversion), so all differences are roundings:
//  * weights: ŝ_j = fl(fl(Σ q·k)·scale): the 16 float lanes of hd/16 fused multiply-adds
//    each and the 4-level tree err by ≤ γ_(hd/16+4)·A_j ≤ (hd/16 + 5)u·A_j, with
//    A_j = scale·Σ_i|q_i·k_ji| ≤ A (their max), then ≤ 2u|s_j| for the roundings of the
//    sum and the scale; p_j = exp(fl(ŝ_j − m)): the subtraction ≤ u|s_j − m| ≤
//    2uS, the polynomial exp ≤ 2 ulp (checked below) ≤ 2u; the factors α, a, b that rescale
//    earlier tiles and parts are exp's of differences of maxima: each ≤ u·|Δm| + 2u, and
//    the |Δm| along a chain telescope to ≤ 2S, so ≤ 2uS + 2u(T + P) in all. So each weight
//    carries a relative error η ≤ u(6S + (hd/16 + 5)A + 2 + 2(T + P)).
//    Relative weight errors η move a convex combination by ≤ η·max|v_j − o| ≤ 2ηV.
//  * sums: P·V per tile: ≤ 64 multiply-adds in key order (γ_64 of Σ w|v|/Σ w ≤ V), then
//    per later tile fma(o, α, acc) (≤ 2 roundings) ≤ 2T, per fold 2 more ≤ 2P, then ·float(1/L)
//    (2 roundings) and the gate (sigmoid via expf ≤ 4 roundings, 1 multiply) ≤ 7:
//    (64 + 2T + 2P + 7)u·V. The double sums of L are exact to ~2^-50.
//  => |o_flash − o*| ≤ B_flash = [2u(6S + (hd/16 + 5)A + 2 + 2(T + P)) + (71 + 2T + 2P)u]·V.
//  The exact path has the same score and weight terms without the rescaling ones
//  (u(6S + 3): expf 1 ulp, then · float(1/Σ) one more) and sums every key in order with
//  axpy (2 roundings per key): B_exact = [2u(6S + 3) + (2n + 7)u]·V; flash vs exact is
//  held to B_flash + B_exact.
//  NMSE (Σ(o − o*)² / Σ o*²): rounding errors of k operations behave like a random walk
//  (Higham & Mary 2019: |err| ≤ λ√k·u·magnitude with probability ≥ 1 − 2k·e^(−λ²/2)); with
//  k = B/(uV) operations and λ = 6 each element's error is below 6·√(B/(uV))·u·V, so
//  NMSE ≤ mean over elements of that squared / mean(o*²) (vs exact: k = (B_flash + B_exact)/(uV)).
//  Q8_0 K cache (integer Q·K, docs/numerics.md): the kernels compute the attention of the
//  quantized query q̂ (its codes times its f16 scales) exactly as they would a float one,
//  except for the score's rounding: γ_(hd/32 + 2)·Â with Â = scale·Σ_i|q̂_i·k_ji| in place of
//  (hd/16 + 5)·A. So o* is taken with q̂ (A and S too), and against the exact path (which
//  uses q) the bound adds the quantization's own effect, |o*(q̂) − o*(q)|, computed in
//  double per element. The per-score bound of docs/numerics.md (δ_b) is checked on its own
//  (QuantizedScoresAreWithinTheirBound).
// The measured values (printed with MOETIER_TEST_VERBOSE=1) are 100–1000× below the bounds.
#include "cpu/flash_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/math.h"
#include "cpu/dot.h"
#include "cpu/flash_attention_impl.h"  // flash::exp_nonpositive (this unit's own scalar copy)
#include "cpu/ops.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"
#include "tensor/types/activation_quant.h"

namespace moetier::cpu {
namespace {

constexpr double kU = 1.0 / (1 << 24);

// One layer's KV cache of n_kv heads × n_pos positions in `type`, plus its f32 values as
// the exact path's load_row sees them.
struct Cache {
  DType type;
  int64_t hd, n_kv, n_pos, row_bytes;
  std::vector<uint8_t> k, v;
  std::vector<float> kf, vf;  // [pos][n_kv·hd]
};

void store(DType type, const float* src, int64_t n, uint8_t* dst) {
  if (type == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (type == DType::F16) {
    f32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), n);
  } else {
    type_ops(type)->quantize_row(src, dst, n);
  }
}

void load(DType type, const uint8_t* src, int64_t n, float* dst) {
  if (type == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (type == DType::F16) {
    fp16_to_f32_row(reinterpret_cast<const uint16_t*>(src), dst, n);
  } else {
    type_ops(type)->dequantize_row(src, dst, n);
  }
}

// Keys N(0, 1) with every 37th a copy of a fixed direction ×3 (queries aligned with it see
// a few dominant keys, the others a broad softmax); values N(0, 1).
Cache make_cache(DType type, int64_t hd, int64_t n_kv, int64_t n_pos, uint32_t seed) {
  Cache c{type, hd, n_kv, n_pos, dtype_row_bytes(type, n_kv * hd), {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> dir(static_cast<size_t>(n_kv * hd));
  for (auto& x : dir) x = g(rng);
  c.k.resize(static_cast<size_t>(c.row_bytes * n_pos));
  c.v.resize(static_cast<size_t>(c.row_bytes * n_pos));
  c.kf.resize(static_cast<size_t>(n_pos * n_kv * hd));
  c.vf.resize(c.kf.size());
  std::vector<float> row(static_cast<size_t>(n_kv * hd));
  for (int64_t p = 0; p < n_pos; ++p) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = p % 37 == 5 ? 3.0f * dir[i] + 0.1f * g(rng) : g(rng);
    store(type, row.data(), n_kv * hd, c.k.data() + p * c.row_bytes);
    for (auto& x : row) x = g(rng);
    store(type, row.data(), n_kv * hd, c.v.data() + p * c.row_bytes);
    load(type, c.k.data() + p * c.row_bytes, n_kv * hd, c.kf.data() + p * n_kv * hd);
    load(type, c.v.data() + p * c.row_bytes, n_kv * hd, c.vf.data() + p * n_kv * hd);
  }
  return c;
}

// Queries (and gates) for n_rows rows × n_heads heads, rows n_heads·hd floats apart; half
// the heads scaled ×2.5 and tilted towards the keys' hot direction (peaked softmax).
struct Queries {
  int64_t n_rows, n_heads, hd;
  std::vector<float> q, gate;
};

Queries make_queries(const Cache& c, int64_t kv_head, int64_t n_rows, int64_t n_heads, uint32_t seed) {
  Queries qs{n_rows, n_heads, c.hd, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  qs.q.resize(static_cast<size_t>(n_rows * n_heads * c.hd));
  qs.gate.resize(qs.q.size());
  const float* hot = c.kf.data() + 5 * c.n_kv * c.hd + kv_head * c.hd;  // position 5 is hot
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* q = qs.q.data() + (r * n_heads + h) * c.hd;
      for (int64_t i = 0; i < c.hd; ++i) q[i] = h % 2 ? 2.5f * g(rng) : 0.5f * g(rng) + 0.15f * hot[i];
    }
  }
  for (auto& x : qs.gate) x = 2.0f * g(rng);
  return qs;
}

FlashAttentionTask make_task(const Cache& c, int64_t kv_head, const Queries& qs, int64_t pos0, bool gate,
                             std::vector<float>& out) {
  out.assign(qs.q.size(), -1.0f);
  const int64_t stride = qs.n_heads * c.hd;
  return {.head_dim = c.hd,
          .n_heads = qs.n_heads,
          .n_rows = qs.n_rows,
          .pos0 = pos0,
          .q = qs.q.data(),
          .q_row_stride = stride,
          .gate = gate ? qs.gate.data() : nullptr,
          .gate_row_stride = stride,
          .out = out.data(),
          .out_row_stride = stride,
          .k = {.data = c.k.data(), .row_bytes = c.row_bytes, .first = kv_head * c.hd, .type = c.type},
          .v = {.data = c.v.data(), .row_bytes = c.row_bytes, .first = kv_head * c.hd, .type = c.type},
          .scale = 1.0f / std::sqrt(static_cast<float>(c.hd))};
}

// The attention of one query vector over keys [0, n) of kv_head: double precision (o*), and
// the exact path's arithmetic (F32 dot kernel, cpu::softmax, axpy in key order, gate).
struct Expected {
  std::vector<double> ref;    // o* with the query the kernel scores with (q̂ for a Q8_0 K cache)
  std::vector<double> ref_q;  // o* with the float query q (= ref unless K is Q8_0)
  std::vector<float> exact;
  double S = 0, V = 0;
  double A = 0;  // max_j scale·Σ_i |q_i·k_ji|: what the float-lane dot products' error scales with
};

// The query a Q8_0 K cache's kernels score with: q's Q8_0 codes times their f16 scales.
std::vector<float> quantized_query(const float* q, int64_t hd) {
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(hd / kQK8_0));
  types::quantize_row_q8_0_activations(q, blocks.data(), hd);
  std::vector<float> out(static_cast<size_t>(hd));
  type_ops(DType::Q8_0)->dequantize_row(blocks.data(), out.data(), hd);
  return out;
}

// o* of query q over keys [0, n) of kv_head in double; *S, *A, *V as in Expected.
std::vector<double> reference(const Cache& c, int64_t kv_head, const float* q, const float* gate, int64_t n,
                              float scale, double* S, double* A, double* V) {
  const int64_t hd = c.hd, w = c.n_kv * c.hd;
  std::vector<double> s(static_cast<size_t>(n));
  double mx = -1e300;
  for (int64_t j = 0; j < n; ++j) {
    const float* k = c.kf.data() + j * w + kv_head * hd;
    double d = 0, a = 0;
    for (int64_t i = 0; i < hd; ++i) {
      d += double{q[i]} * k[i];
      a += std::fabs(double{q[i]} * k[i]);
    }
    s[j] = d * scale;
    *A = std::max(*A, a * scale);
    mx = std::max(mx, s[j]);
    *S = std::max(*S, std::fabs(s[j]));
    const float* v = c.vf.data() + j * w + kv_head * hd;
    for (int64_t i = 0; i < hd; ++i) *V = std::max(*V, double{std::fabs(v[i])});
  }
  std::vector<double> o(static_cast<size_t>(hd), 0.0);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double p = std::exp(s[j] - mx);
    sum += p;
    const float* v = c.vf.data() + j * w + kv_head * hd;
    for (int64_t i = 0; i < hd; ++i) o[i] += p * v[i];
  }
  for (int64_t i = 0; i < hd; ++i) {
    o[i] /= sum;
    if (gate) o[i] *= 1.0 / (1.0 + std::exp(-double{gate[i]}));
  }
  return o;
}

Expected expected(const Cache& c, int64_t kv_head, const float* q, const float* gate, int64_t n, float scale,
                  bool quantized_k) {
  const int64_t hd = c.hd, w = c.n_kv * c.hd;
  Expected e;
  if (quantized_k) {
    const std::vector<float> qhat = quantized_query(q, hd);
    e.ref = reference(c, kv_head, qhat.data(), gate, n, scale, &e.S, &e.A, &e.V);
    double S_q = 0, A_q = 0, V_q = 0;
    e.ref_q = reference(c, kv_head, q, gate, n, scale, &S_q, &A_q, &V_q);
    e.S = std::max(e.S, S_q);  // the exact path's bound takes q's scores
  } else {
    e.ref = reference(c, kv_head, q, gate, n, scale, &e.S, &e.A, &e.V);
    e.ref_q = e.ref;
  }
  std::vector<float> sf(static_cast<size_t>(n));
  const DotKernel& dot = *best_dot_kernel(DType::F32, cpu_features());
  for (int64_t j = 0; j < n; ++j) sf[j] = dot.fn(hd, c.kf.data() + j * w + kv_head * hd, q) * scale;
  softmax(sf.data(), n);
  e.exact.assign(static_cast<size_t>(hd), 0.0f);
  for (int64_t j = 0; j < n; ++j) axpy(sf[j], c.vf.data() + j * w + kv_head * hd, hd, e.exact.data());
  if (gate) {
    for (int64_t i = 0; i < hd; ++i) e.exact[i] *= sigmoid(gate[i]);
  }
  return e;
}

// B_flash and B_exact of the header comment, in units of u·V.
// quantized_k: the integer scores of a Q8_0 K cache, γ_(hd/32 + 2) ≤ (hd/32 + 3)u of Â.
double flash_bound_units(double S, double A, int64_t hd, int64_t n, bool quantized_k = false) {
  const double T = std::min<double>(16, static_cast<double>((n + 63) / 64));
  const double P = static_cast<double>((n + kFlashPartKeys - 1) / kFlashPartKeys);
  // γ_(hd/16 + 4) ≤ (hd/16 + 5)u; integer scores γ_(hd/32 + 2) ≤ (hd/32 + 3)u
  const double dot = (quantized_k ? static_cast<double>(hd) / 32 + 3 : static_cast<double>(hd) / 16 + 5) * A;
  return 2 * (6 * S + dot + 2 + 2 * (T + P)) + 71 + 2 * T + 2 * P;
}
double exact_bound_units(double S, int64_t n) { return 2 * (6 * S + 3) + 2 * static_cast<double>(n) + 7; }

struct Stats {
  double max_ratio_ref = 0, max_ratio_exact = 0;  // max |Δ| / bound
  double err2_ref = 0, err2_exact = 0, ref2 = 0, nmse_bound_ref = 0, nmse_bound_exact = 0;
  double worst_units_ref = 0;                     // max |Δ| / (u·V)
  int64_t elems = 0;
};

// Runs `task` with `kernels` and checks every output vector against expected().
void check_task(const FlashKernels& kernels, const Cache& c, int64_t kv_head, const Queries& qs, int64_t pos0,
                bool gate, Stats& st) {
  std::vector<float> out;
  const FlashAttentionTask task = make_task(c, kv_head, qs, pos0, gate, out);
  FlashScratch scratch;
  kernels.attend(task, scratch);
  for (int64_t r = 0; r < qs.n_rows; ++r) {
    for (int64_t h = 0; h < qs.n_heads; ++h) {
      const int64_t at = (r * qs.n_heads + h) * c.hd;
      const int64_t n = pos0 + r + 1;
      const bool qk = c.type == DType::Q8_0;
      const Expected e =
          expected(c, kv_head, qs.q.data() + at, gate ? qs.gate.data() + at : nullptr, n, task.scale, qk);
      const double k_flash = flash_bound_units(e.S, e.A, c.hd, n, qk), k_exact = exact_bound_units(e.S, n);
      const double bf = k_flash * kU * e.V;
      const double be = k_exact * kU * e.V;
      for (int64_t i = 0; i < c.hd; ++i) {
        const double f = out[at + i];
        const double d_ref = std::fabs(f - e.ref[i]);
        const double d_exact = std::fabs(f - e.exact[i]);
        const double shift = std::fabs(e.ref[i] - e.ref_q[i]);  // q̂ instead of q (0 unless Q8_0 K)
        ASSERT_LE(d_ref, bf) << "row " << r << " head " << h << " elem " << i << " keys " << n;
        ASSERT_LE(d_exact, bf + be + shift) << "row " << r << " head " << h << " elem " << i << " keys " << n;
        st.max_ratio_ref = std::max(st.max_ratio_ref, d_ref / bf);
        st.max_ratio_exact = std::max(st.max_ratio_exact, d_exact / (bf + be + shift));
        st.worst_units_ref = std::max(st.worst_units_ref, d_ref / (kU * e.V));
        st.err2_ref += d_ref * d_ref;
        st.err2_exact += d_exact * d_exact;
        st.ref2 += e.ref[i] * e.ref[i];
        st.nmse_bound_ref += std::pow(6 * std::sqrt(k_flash) * kU * e.V, 2);
        st.nmse_bound_exact += std::pow(6 * std::sqrt(k_flash + k_exact) * kU * e.V + shift, 2);
        ++st.elems;
      }
    }
  }
}

struct Shape {
  int64_t hd, group;
  DType type;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  return "hd" + std::to_string(info.param.hd) + "_g" + std::to_string(info.param.group) + "_" +
         std::string(dtype_traits(info.param.type).name);
}

class FlashAttentionAccuracy : public ::testing::TestWithParam<Shape> {};

// A prompt micro-batch from position 0 (11 rows), one that crosses the first part boundary
// (rows at 1019..1030: earlier micro-batches' keys and this one's), and decode rows after
// 4,500 keys (4 parts plus a partial one), gate on and off; the second KV head (a head
// offset inside each cache row).
TEST_P(FlashAttentionAccuracy, MatchesDoubleReferenceAndExactPath) {
  const Shape sh = GetParam();
  const Cache c = make_cache(sh.type, sh.hd, 2, 4600, 1000 + static_cast<uint32_t>(sh.hd + sh.group));
  const FlashKernels& k = flash_kernels(cpu_features());
  Stats st;
  struct Rows {
    int64_t pos0, n_rows;
  };
  for (const Rows rows : {Rows{0, 11}, Rows{1019, 12}, Rows{4497, 1}}) {
    for (const bool gate : {false, true}) {
      const Queries qs = make_queries(c, 1, rows.n_rows, sh.group, static_cast<uint32_t>(rows.pos0 + gate));
      check_task(k, c, 1, qs, rows.pos0, gate, st);
      if (HasFatalFailure()) return;
    }
  }
  const double nmse_ref = st.err2_ref / st.ref2, nmse_exact = st.err2_exact / st.ref2;
  const double nmse_bound = st.nmse_bound_ref / st.ref2, nmse_bound_exact = st.nmse_bound_exact / st.ref2;
  EXPECT_LE(nmse_ref, nmse_bound);
  EXPECT_LE(nmse_exact, nmse_bound_exact);
  if (std::getenv("MOETIER_TEST_VERBOSE")) {
    std::fprintf(stderr,
                 "%s hd %lld g %lld: max|Δref| %.3g of bound, %.1f u·V; max|Δexact| %.3g of bound; "
                 "NMSE vs ref %.3g, "
                 "vs exact %.3g (bound %.3g)\n",
                 isa_tier_name(k.tier).data(), static_cast<long long>(sh.hd), static_cast<long long>(sh.group), st.max_ratio_ref,
                 st.worst_units_ref, st.max_ratio_exact, nmse_ref, nmse_exact, nmse_bound_exact);
  }
}

std::vector<Shape> all_shapes() {
  std::vector<Shape> v;
  for (int64_t hd : {64, 128, 256}) {
    for (int64_t g : {1, 2, 8}) {
      for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) v.push_back({hd, g, t});
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionAccuracy, ::testing::ValuesIn(all_shapes()), shape_name);

// The polynomial exp the kernels use, over its whole range: ≤ 2 ulp from the correctly
// rounded e^x (the bound's "2u"), exactly 1 at 0, exactly 0 below −87 and at −inf.
TEST(FlashAttention, ExpIsWithinTwoUlp) {
  double worst_ulp = 0;
  for (float x = 0.0f; x > -87.0f; x = std::nextafter(x, -100.0f) - 1.3e-4f * std::fabs(x) - 1e-7f) {
    const double want = std::exp(double{x});
    const float got = flash::exp_nonpositive(x);
    const float near = static_cast<float>(want);
    const double ulp = std::nextafter(near, 2.0f * near) - near;
    worst_ulp = std::max(worst_ulp, std::fabs(got - want) / ulp);
  }
  EXPECT_LE(worst_ulp, 2.0);
  if (std::getenv("MOETIER_TEST_VERBOSE")) std::fprintf(stderr, "exp_nonpositive: worst %.3f ulp\n", worst_ulp);
  EXPECT_EQ(flash::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(flash::exp_nonpositive(-88.0f), 0.0f);
  EXPECT_EQ(flash::exp_nonpositive(-INFINITY), 0.0f);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The build of every tier this CPU runs gives the scalar build's bits, for every cache type,
// with the gate, prompt rows and a deep decode row.
TEST(FlashAttention, IsaVariantsAreBitIdenticalToScalar) {
  std::vector<const FlashKernels*> variants;
  for (IsaTier t : kIsaTiers) {
    if (t != IsaTier::kScalar && isa_tier_runs_on(t, cpu_features())) variants.push_back(&flash_kernels(t));
  }
  if (variants.empty()) GTEST_SKIP() << "CPU runs no tier above scalar";
  for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    for (int64_t hd : {64, 256}) {
      const Cache c = make_cache(t, hd, 2, 3100, 7);
      for (const auto& [pos0, n_rows] : {std::pair<int64_t, int64_t>{0, 9}, {1020, 6}, {3090, 1}}) {
        const Queries qs = make_queries(c, 1, n_rows, 8, 3);
        std::vector<float> want, got;
        FlashScratch scratch;
        flash_kernels(IsaTier::kScalar).attend(make_task(c, 1, qs, pos0, true, want), scratch);
        for (const FlashKernels* k : variants) {
          k->attend(make_task(c, 1, qs, pos0, true, got), scratch);
          EXPECT_TRUE(same_bits(got, want))
              << isa_tier_name(k->tier) << " " << dtype_traits(t).name << " hd " << hd << " pos0 " << pos0;
        }
        if (t == DType::Q8_0) {  // integer scores with an f16 V read in place (decode) or converted
          const Cache cv = make_cache(DType::F16, hd, 2, 3100, 8);
          const auto mixed = [&](std::vector<float>& out) {
            FlashAttentionTask task = make_task(c, 1, qs, pos0, true, out);
            task.v = {.data = cv.v.data(), .row_bytes = cv.row_bytes, .first = hd, .type = DType::F16};
            return task;
          };
          flash_kernels(IsaTier::kScalar).attend(mixed(want), scratch);
          for (const FlashKernels* k : variants) {
            k->attend(mixed(got), scratch);
            EXPECT_TRUE(same_bits(got, want)) << isa_tier_name(k->tier) << " q8_0 K, f16 V, hd " << hd << " pos0 " << pos0;
          }
        }
      }
    }
  }
}

// The integer scores of a Q8_0 K cache (this unit's scalar copy of the kernels' code) for
// a partial tile of 61 keys: (1) every score is the arithmetic of docs/numerics.md written
// out here (the integer sum, then fma(float(isum), d_k·d_q, acc) over the blocks in order,
// then · scale); (2) every code is within δ_b of its query element and every score within
// the per-score bound (docs/numerics.md) of the float query's exact score; (3) a block of
// 3 vectors gives each the bits it gets alone. Keys include the extreme codes (all −128,
// all +127); queries a block of equal values (every code ±127), a zero block and a tiny
// one (its f16 scale is subnormal).
TEST(FlashAttention, QuantizedScoresAreWithinTheirBound) {
  constexpr int64_t hd = 128, nb = hd / kQK8_0, n = 61, n_vec = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> code(-128, 127);
  std::vector<BlockQ8_0> keys(static_cast<size_t>(n * nb));
  std::vector<float> kf(static_cast<size_t>(n * hd));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8_0& blk = keys[static_cast<size_t>(j * nb + b)];
      blk.d = f32_to_fp16(j == 3 || j == 4 ? 0.02f : std::fabs(g(rng)) * 0.05f + 1e-3f);
      for (int i = 0; i < kQK8_0; ++i) {
        blk.qs[i] = static_cast<int8_t>(j == 3 ? -128 : j == 4 ? 127 : code(rng));
        kf[static_cast<size_t>(j * hd + b * kQK8_0 + i)] = static_cast<float>(blk.qs[i]) * fp16_to_f32(blk.d);
      }
    }
  }
  std::vector<float> q(static_cast<size_t>(n_vec * hd));
  for (int64_t i = 0; i < hd; ++i) {
    q[static_cast<size_t>(i)] = 2.0f * g(rng);
    q[static_cast<size_t>(2 * hd + i)] = 0.3f * g(rng);
    const int64_t b = i / kQK8_0;
    q[static_cast<size_t>(hd + i)] = b == 0 ? -1.5f : b == 1 ? 0.0f : b == 2 ? 1e-4f * g(rng) : g(rng);
  }
  std::vector<float> area(static_cast<size_t>(n_vec * hd));
  const flash::QuantQueries qq = flash::quant_queries(area.data(), n_vec, hd);
  for (int64_t v = 0; v < n_vec; ++v) {
    flash::quantize_query(q.data() + v * hd, hd, qq.codes + v * hd, qq.d + v * nb, qq.init + v * nb);
  }
  const KvHeadRows kv{.data = reinterpret_cast<const uint8_t*>(keys.data()),
                      .row_bytes = nb * static_cast<int64_t>(sizeof(BlockQ8_0)),
                      .first = 0,
                      .type = DType::Q8_0};
  std::vector<uint32_t> words(static_cast<size_t>(kFlashKeyTile * hd / 4));
  std::vector<float> dk(static_cast<size_t>(kFlashKeyTile * nb));
  flash::repack_keys_q8(kv, hd, 0, n, words.data(), dk.data(), 0, 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> s3(static_cast<size_t>(n_vec * kFlashKeyTile)), s1(static_cast<size_t>(kFlashKeyTile));
  flash::scores_q8<3>(qq.codes, qq.d, qq.init, hd, words.data(), dk.data(), n, scale, s3.data());
  double worst = 0;
  for (int64_t v = 0; v < n_vec; ++v) {
    flash::scores_q8<1>(qq.codes + v * hd, qq.d + v * nb, qq.init + v * nb, hd, words.data(), dk.data(), n, scale,
                        s1.data());
    const float* qv = q.data() + v * hd;
    std::vector<double> delta(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) {
      double amax = 0;
      for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, double{std::fabs(qv[b * kQK8_0 + i])});
      const double d = amax / 127;
      delta[static_cast<size_t>(b)] = d * (0.5 + 254 * kU) + 127 * ((1.0 / 2048 + 2 * kU) * d + std::ldexp(1.0, -25));
      for (int i = 0; i < kQK8_0; ++i) {
        const double qhat = static_cast<double>(qq.codes[v * hd + b * kQK8_0 + i]) * qq.d[v * nb + b];
        ASSERT_LE(std::fabs(qhat - qv[b * kQK8_0 + i]), delta[static_cast<size_t>(b)]) << "vector " << v << " block " << b;
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const BlockQ8_0* kb = keys.data() + j * nb;
      float acc = 0;
      double exact = 0, quant = 0, a_hat = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t isum = 0;
        for (int i = 0; i < kQK8_0; ++i) {
          const int64_t at = b * kQK8_0 + i;
          const int c = qq.codes[v * hd + at];
          isum += int64_t{kb[b].qs[i]} * c;
          const double k = kf[static_cast<size_t>(j * hd + at)];
          exact += double{qv[at]} * k;
          quant += std::fabs(k) * delta[static_cast<size_t>(b)];
          a_hat += std::fabs(static_cast<double>(c) * qq.d[v * nb + b] * k);
        }
        acc = math::fma_f32(static_cast<float>(isum), fp16_to_f32(kb[b].d) * qq.d[v * nb + b], acc);
      }
      const float want = acc * scale;
      EXPECT_EQ(std::memcmp(&s1[static_cast<size_t>(j)], &want, sizeof(float)), 0) << "vector " << v << " key " << j;
      EXPECT_EQ(std::memcmp(&s1[static_cast<size_t>(j)], &s3[static_cast<size_t>(v * kFlashKeyTile + j)], sizeof(float)), 0)
          << "vector " << v << " key " << j << " in a block of 3";
      const double bound = scale * quant + (static_cast<double>(nb) + 3) * kU * scale * a_hat;
      const double err = std::fabs(double{s1[static_cast<size_t>(j)]} - exact * scale);
      EXPECT_LE(err, bound) << "vector " << v << " key " << j;
      worst = std::max(worst, err / bound);
    }
  }
  if (std::getenv("MOETIER_TEST_VERBOSE")) std::fprintf(stderr, "q8_0 scores: worst error %.3g of the bound\n", worst);
}

// attend_part for every part then combine (the threads' split of a deep decode) writes the
// bits attend writes.
TEST(FlashAttention, PartsCombinedEqualTheWholeTask) {
  const FlashKernels& k = flash_kernels(cpu_features());
  const Cache c = make_cache(DType::F16, 128, 2, 5000, 11);
  for (const auto& [pos0, n_rows] : {std::pair<int64_t, int64_t>{4990, 1}, {2040, 10}, {100, 3}}) {
    const Queries qs = make_queries(c, 0, n_rows, 4, 5);
    std::vector<float> whole, split;
    FlashScratch scratch;
    k.attend(make_task(c, 0, qs, pos0, true, whole), scratch);
    const FlashAttentionTask task = make_task(c, 0, qs, pos0, true, split);
    const int64_t n_parts = task.n_parts(), n_vec = task.n_vectors();
    std::vector<float> o(static_cast<size_t>(n_parts * n_vec * 128)), m(static_cast<size_t>(n_parts * n_vec));
    std::vector<double> l(static_cast<size_t>(n_parts * n_vec));
    std::vector<FlashPartial> parts;
    for (int64_t p = 0; p < n_parts; ++p) {
      parts.push_back({.o = o.data() + p * n_vec * 128, .m = m.data() + p * n_vec, .l = l.data() + p * n_vec});
    }
    for (int64_t p = n_parts - 1; p >= 0; --p) k.attend_part(task, p, scratch, parts[static_cast<size_t>(p)]);
    FlashScratch other;  // the combining thread is not the one that ran the parts
    k.combine(task, parts.data(), n_parts, other);
    EXPECT_TRUE(same_bits(split, whole)) << "pos0 " << pos0;
  }
}

// A row's output is the same bits whether it runs with 8 other rows and all 8 heads of its
// group in one task or alone with one head: items, blocks of rows and of heads do not
// change any row's arithmetic (what makes batched sequences equal each alone). With an f16
// cache the lone row reads the cache in place and the 9-row task through the converted
// tiles, so this also holds the two reads to the same bits.
TEST(FlashAttention, RowsDoNotDependOnTheirTask) {
  const FlashKernels& k = flash_kernels(cpu_features());
  for (DType type : {DType::Q8_0, DType::F16}) {
    const Cache c = make_cache(type, 64, 1, 2100, 13);
    const int64_t pos0 = 1015, n_rows = 9, heads = 8, hd = 64;
    const Queries qs = make_queries(c, 0, n_rows, heads, 17);
    std::vector<float> together;
    FlashScratch scratch;
    k.attend(make_task(c, 0, qs, pos0, true, together), scratch);
    for (int64_t r = 0; r < n_rows; ++r) {
      // One head alone, and the row's whole group (8 vectors: the decode block).
      for (int64_t h = 0; h < heads; ++h) {
        Queries one{1, 1, hd, {}, {}};
        const size_t at = static_cast<size_t>((r * heads + h) * hd);
        one.q.assign(qs.q.begin() + at, qs.q.begin() + at + hd);
        one.gate.assign(qs.gate.begin() + at, qs.gate.begin() + at + hd);
        std::vector<float> alone;
        k.attend(make_task(c, 0, one, pos0 + r, true, alone), scratch);
        EXPECT_EQ(std::memcmp(alone.data(), together.data() + at, hd * sizeof(float)), 0)
            << dtype_name(type) << " row " << r << " head " << h;
      }
      Queries group{1, heads, hd, {}, {}};
      const size_t at = static_cast<size_t>(r * heads * hd);
      group.q.assign(qs.q.begin() + at, qs.q.begin() + at + heads * hd);
      group.gate.assign(qs.gate.begin() + at, qs.gate.begin() + at + heads * hd);
      std::vector<float> decode;
      k.attend(make_task(c, 0, group, pos0 + r, true, decode), scratch);
      EXPECT_EQ(std::memcmp(decode.data(), together.data() + at, heads * hd * sizeof(float)), 0)
          << dtype_name(type) << " row " << r << " (whole group)";
    }
  }
}

// A task over several consecutive KV heads (whole cache rows, what the attention block uses
// when there are enough items) gives every vector the bits of one-head tasks, whole or
// split into parts, for prompt rows crossing a part boundary and for cache types read in
// place (f32) or converted (f16, q8_0).
TEST(FlashAttention, MultiKvHeadTaskEqualsOneHeadTasks) {
  const FlashKernels& k = flash_kernels(cpu_features());
  constexpr int64_t kKv = 3, kGroup = 2, kHd = 64, kRows = 5, kPos0 = 1100;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const Cache c = make_cache(type, kHd, kKv, kPos0 + kRows, 31);
    const Queries qs = make_queries(c, 0, kRows, kKv * kGroup, 37);
    std::vector<float> together;
    FlashAttentionTask all = make_task(c, 0, qs, kPos0, true, together);
    all.n_heads = kGroup;
    all.n_kv_heads = kKv;
    FlashScratch scratch;
    k.attend(all, scratch);
    // The same task split into its parts and folded.
    std::vector<float> split(together.size(), -1.0f);
    FlashAttentionTask all_split = all;
    all_split.out = split.data();
    const int64_t n_parts = all_split.n_parts(), n_vec = all_split.n_vectors();
    ASSERT_GE(n_parts, 2);
    std::vector<float> o(static_cast<size_t>(n_parts * n_vec * kHd)), m(static_cast<size_t>(n_parts * n_vec));
    std::vector<double> l(static_cast<size_t>(n_parts * n_vec));
    std::vector<FlashPartial> parts;
    for (int64_t p = 0; p < n_parts; ++p) {
      parts.push_back({.o = o.data() + p * n_vec * kHd, .m = m.data() + p * n_vec, .l = l.data() + p * n_vec});
      k.attend_part(all_split, p, scratch, parts.back());
    }
    k.combine(all_split, parts.data(), n_parts, scratch);
    EXPECT_EQ(std::memcmp(split.data(), together.data(), together.size() * sizeof(float)), 0) << dtype_name(type);
    for (int64_t g = 0; g < kKv; ++g) {
      std::vector<float> alone;
      FlashAttentionTask one = make_task(c, g, qs, kPos0, true, alone);
      one.n_heads = kGroup;
      one.q += g * kGroup * kHd;
      one.gate += g * kGroup * kHd;
      one.out += g * kGroup * kHd;
      k.attend(one, scratch);
      for (int64_t r = 0; r < kRows; ++r) {
        const int64_t at = r * kKv * kGroup * kHd + g * kGroup * kHd;
        EXPECT_EQ(std::memcmp(alone.data() + at, together.data() + at, kGroup * kHd * sizeof(float)), 0)
            << dtype_name(type) << " kv head " << g << " row " << r;
      }
    }
  }
}

// The per-thread scratch is a function of head_dim and the task's vectors: a decode at
// 60,000 keys uses exactly what one at 100 keys does.
TEST(FlashAttention, ScratchDoesNotGrowWithDepth) {
  const FlashKernels& k = flash_kernels(cpu_features());
  const Cache c = make_cache(DType::F16, 256, 1, 60001, 19);
  const Queries qs = make_queries(c, 0, 1, 8, 23);
  std::vector<float> out;
  FlashScratch shallow, deep;
  k.attend(make_task(c, 0, qs, 100, false, out), shallow);
  k.attend(make_task(c, 0, qs, 60000, false, out), deep);
  EXPECT_EQ(deep.bytes(), shallow.bytes());
  EXPECT_EQ(deep.bytes(), flash_scratch_bytes(256, 1, 8));
  EXPECT_LT(deep.bytes(), size_t{200} << 10);  // K and V tiles (2 × 64 KiB) + 8 vectors' state
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace moetier::cpu
