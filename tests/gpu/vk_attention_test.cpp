// flash_attention (src/gpu/vulkan/vk_ops_attention.cpp) against a double-precision CPU loop
// and against the exact GPU kernel attention(), at the real model shapes (Qwen3.6-35B-A3B:
// hd 256, 16 query / 2 KV heads, output gate; qwen3moe: hd 128, 32 / 4; a tiny hd 64, 4 / 2),
// for prompt batches and decode at long depth (split-K, lavapipe's loop limit), all cache
// types; plus its tuning knobs, scratch pieces and errors.
//
// Tolerance, derived. All three compute the same function of the same numbers: the cache is
// quantized on the CPU and every side reads what its blocks decode to (f16 → f32 and q·d are
// exact in f32). The CPU loop is exact to ~1e-16; attention() sums in float-float (~u² per
// sum) but, like flash, takes exp from the GPU. So flash differs from either by the rounding
// of its own f32 arithmetic, u = 2^-24 per operation (plus attention()'s exp errors). With
// independent rounding errors (variances add: the model behind llama.cpp's NMSE checks), the
// relative error of an output o = Σ_p w_p v_p / Σ_p w_p (w_p = 2^(s_p − m)) has these parts:
//   * the running sums l = Σ w_p and o = Σ w_p v_p over a row's n_keys keys: recursive f32
//     sums whose partial sums grow like the final one (l linearly, o as a random walk), a
//     relative variance ≤ n_keys · u² each; the per-tile rescaling (one product per tile)
//     and the split-K merge (one per chunk) add less;
//   * the scores s = q·k · scale · log2 e over hd products: a random-walk dot product errs by
//     δs² ≈ u² hd σ_q² σ_k² log2(e)² / 2 ≈ 4 hd u² here (σ_q = 2, σ_k = 1), the query's
//     pre-scaling by u |s| more; an error δs moves o by ln 2 · Σ_p w_p δs_p (v_p − o) / l, a
//     relative variance ≤ E[δs²]: ≤ 16 (hd + 2) u² with room;
//   * exp2: Vulkan allows (3 + 2|x|) ulp = 2 (3 + 2|x|) u, x = s − m in log2 units; weights
//     that matter have |x| ≲ 8 (w ≥ 2^-8): ≤ 38 u per weight, entering like δs: ≤ 38² u²;
//   * the final 1/l, the product and the gate's sigmoid: a few ulp, ≤ 16 u².
// Summed: NMSE_model = (2 n_keys + 16 (hd + 2) + 38² + 16) u², and the bound is 4 NMSE_model:
// ×2 because flash vs attention() adds two such errors (the exp's on both sides), ×2 margin.
// (Each part above already takes a worst-case size as its standard deviation.) A real bug is
// far above it: one key too many or too few (a causal-mask slip) moves o by w_p (v_p − o) / l,
// ≈ |v| / n_keys for a typical key, while |o| ≈ |v| / √n_eff: an NMSE ≈ n_eff / n_keys², at
// 20000 keys (n_eff ≈ n_keys / e^4 ≈ 370 with these score spreads) 9e-7, 1400 × the bound
// there (6.5e-10), and more at shorter ranges; a lost tile is 16 keys' worth.
// Max-abs: an element's error has σ ≤ √NMSE_model · |b| ≤ √bound · max|b|, and over ≤ 10⁶
// elements the largest stays under 6 σ: max|a − b| ≤ 6 √bound · max|b|.
// Measured on lavapipe (printed per case): NMSE 3e-15 ... 5e-12, at most 1.1 % of its bound
// (4e-11 ... 7e-10); max-abs ≤ 2.6e-6 with max|b| ≈ 1, at most 3 % of its bound: the model
// is pessimistic, as each part takes its worst case.
//
// Run time on lavapipe (2 cores; ~15 s with an empty pipeline cache, most of it compiling
// the pipelines): the references check sampled rows of the big cases (the flash kernel
// computes all rows); the exact kernel, one dispatch per sampled row, runs only where its
// loops stay within lavapipe's loop limit (its 64 invocations per (row, head) loop over
// ~n_keys · hd / 64 products: not at 20000 keys).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "gpu/vulkan/vk_ops.h"
#include "tensor/dtype.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff

struct Gpu {
  vk::Device& dev;
  vk::BufferRef up(const void* data, size_t bytes) {
    return *dev.create_buffer(data, (bytes + 3) / 4 * 4, vk::MemoryUse::kScratch);
  }
  vk::BufferRef zeros(size_t bytes) { return *dev.create_buffer(nullptr, (bytes + 3) / 4 * 4, vk::MemoryUse::kScratch); }
  std::vector<float> down(const vk::BufferRef& b, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(dev.download(b, v.data(), n * 4).is_ok());
    return v;
  }
};

// One cache (K or V): [n_keys][width] elements of `type`, quantized on the CPU, and the f32
// values its blocks decode to (what every kernel reads).
struct Cache {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
Cache make_cache(DType type, int64_t n_keys, int64_t width, uint32_t seed) {
  const auto x = testing::random_normal(static_cast<size_t>(n_keys * width), seed);
  const TypeOps* ops = type_ops(type);
  const int64_t row_bytes = dtype_row_bytes(type, width);
  Cache c{std::vector<uint8_t>(static_cast<size_t>(n_keys * row_bytes)), std::vector<float>(x.size())};
  for (int64_t p = 0; p < n_keys; ++p) {
    ops->quantize_row(&x[static_cast<size_t>(p * width)], &c.bytes[static_cast<size_t>(p * row_bytes)], width);
    ops->dequantize_row(&c.bytes[static_cast<size_t>(p * row_bytes)], &c.values[static_cast<size_t>(p * width)], width);
  }
  return c;
}

struct Shape {
  int64_t hd, n_head, n_kv;
  bool gate;
};
constexpr Shape kQwen36{256, 16, 2, true}, kQwen3Moe{128, 32, 4, false}, kTiny{64, 4, 2, false};

// Query rows [row_base + rows][n_head][hd] (the first row_base rows belong to another
// sequence), and when gated the model's q_full rows [row][n_head][query hd | gate hd].
struct Problem {
  Shape shape;
  int64_t rows, pos0, row_base;
  DType k_type, v_type;
  std::vector<float> q, gate;
  Cache k, v;
  int64_t n_keys() const { return pos0 + rows; }
  int64_t q_floats() const { return (row_base + rows) * shape.n_head * shape.hd; }
  vk::AttentionDispatch dispatch() const {
    return {.hd = shape.hd, .n_head = shape.n_head, .n_head_kv = shape.n_kv, .n_rows = rows, .row_base = row_base,
            .pos0 = pos0, .scale = 1.0f / std::sqrt(static_cast<float>(shape.hd)), .k_type = k_type, .v_type = v_type,
            .has_gate = shape.gate, .gate_row_stride = 2 * shape.n_head * shape.hd, .gate_head_stride = 2 * shape.hd,
            .gate_offset = shape.hd};
  }
};

Problem make_problem(Shape s, int64_t rows, int64_t pos0, DType kt, DType vt, int64_t row_base = 0) {
  const int64_t keys = pos0 + rows, width = s.n_kv * s.hd;
  // q of scale 2 against unit k: scores of σ ≈ 2, so the softmax is peaked enough that the
  // running max moves and the rescaling matters (n_eff ≈ n_keys / e⁴).
  Problem p{.shape = s, .rows = rows, .pos0 = pos0, .row_base = row_base, .k_type = kt, .v_type = vt,
            .q = testing::random_normal(static_cast<size_t>((row_base + rows) * s.n_head * s.hd), 21, 2.0f),
            .gate = s.gate ? testing::random_normal(static_cast<size_t>((row_base + rows) * s.n_head * 2 * s.hd), 22)
                           : std::vector<float>{},
            .k = make_cache(kt, keys, width, 23),
            .v = make_cache(vt, keys, width, 24)};
  return p;
}

// Row r of the dispatch, all heads ([n_head][hd]): the CPU's attention in double.
std::vector<double> cpu_row(const Problem& p, int64_t r) {
  const auto [hd, n_head, n_kv, gated] = p.shape;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t keys = p.pos0 + r + 1, width = n_kv * hd;
  std::vector<double> out(static_cast<size_t>(n_head * hd)), s(static_cast<size_t>(keys));
  for (int64_t h = 0; h < n_head; ++h) {
    const int64_t g = h / (n_head / n_kv);
    const float* q = &p.q[static_cast<size_t>(((p.row_base + r) * n_head + h) * hd)];
    double mx = -1e300, sum = 0;
    for (int64_t k = 0; k < keys; ++k) {
      const float* kr = &p.k.values[static_cast<size_t>(k * width + g * hd)];
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i) dot += double{q[i]} * kr[i];
      s[static_cast<size_t>(k)] = dot * scale;
      mx = std::max(mx, dot * scale);
    }
    for (auto& e : s) sum += (e = std::exp(e - mx));
    double* o = &out[static_cast<size_t>(h * hd)];
    for (int64_t k = 0; k < keys; ++k) {
      const float* vr = &p.v.values[static_cast<size_t>(k * width + g * hd)];
      const double w = s[static_cast<size_t>(k)] / sum;
      for (int64_t c = 0; c < hd; ++c) o[c] += w * vr[c];
    }
    if (gated) {
      for (int64_t c = 0; c < hd; ++c) {
        const double x = p.gate[static_cast<size_t>((p.row_base + r) * 2 * n_head * hd + h * 2 * hd + hd + c)];
        o[c] /= 1.0 + std::exp(-x);
      }
    }
  }
  return out;
}

double nmse_bound(const Problem& p) {
  const double n_keys = static_cast<double>(p.n_keys()), hd = static_cast<double>(p.shape.hd);
  const double model = (2.0 * n_keys + 16.0 * (hd + 2.0) + 38.0 * 38.0 + 16.0) * kU * kU;
  return 4.0 * model;
}

struct Errors {
  double nmse = 0, max_abs = 0, max_ref = 0;
};
// got / want over the rows listed (dispatch rows; floats [row][n_head][hd] of the dispatch).
template <class Want>
Errors compare(const std::vector<float>& got, const std::vector<int64_t>& rows, int64_t row_floats, Want&& want_row) {
  double num = 0, den = 0;
  Errors e;
  for (int64_t r : rows) {
    const std::vector<double> want = want_row(r);
    for (int64_t i = 0; i < row_floats; ++i) {
      const double a = got[static_cast<size_t>(r * row_floats + i)], b = want[static_cast<size_t>(i)];
      num += (a - b) * (a - b);
      den += b * b;
      e.max_abs = std::max(e.max_abs, std::fabs(a - b));
      e.max_ref = std::max(e.max_ref, std::fabs(b));
    }
  }
  e.nmse = num / den;
  return e;
}

void expect_within(const Errors& e, double bound, const std::string& what) {
  EXPECT_LE(e.nmse, bound) << what;
  EXPECT_LE(e.max_abs, 6.0 * std::sqrt(bound) * e.max_ref) << what;
  std::printf("  %-44s NMSE %.2e (bound %.1e)  max-abs %.2e (bound %.1e)\n", what.c_str(), e.nmse, bound, e.max_abs,
              6.0 * std::sqrt(bound) * e.max_ref);
}

// Rows a reference checks: the last (the longest key range), the first when min_rows is 2,
// and evenly spaced ones between, as many as `budget` key · dim products (all heads) allow.
std::vector<int64_t> sample_rows(const Problem& p, double budget, int64_t min_rows) {
  const double per_row = static_cast<double>(p.n_keys()) * static_cast<double>(p.shape.n_head * p.shape.hd);
  const int64_t n = std::min(p.rows, std::max(min_rows, static_cast<int64_t>(budget / per_row)));
  if (n == 1) return {p.rows - 1};
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(i * (p.rows - 1) / (n - 1));
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}
constexpr double kCpuBudget = 4e7;    // ~0.3 s of double loops
constexpr double kExactBudget = 1e7;  // ~0.2 s of attention() on lavapipe

// Whether attention()'s loops stay within lavapipe's limit: per invocation, the score loop
// (keys/64 · (hd + 1)), the exp loop (keys/64) and the output loop (hd/64 · (keys + 1)).
bool exact_kernel_fits(const vk::DeviceInfo& info, const Problem& p) {
  if (!info.loop_limited) return true;
  const int64_t keys = p.n_keys(), per_thread = (keys + 63) / 64, cols = (p.shape.hd + 63) / 64;
  return per_thread * (p.shape.hd + 2) + cols * (keys + 1) + 16 < 60000;
}

struct GpuProblem {
  vk::BufferRef q, k, v, gate, out;
};
GpuProblem upload(Gpu& g, const Problem& p) {
  GpuProblem b{.q = g.up(p.q.data(), p.q.size() * 4), .k = g.up(p.k.bytes.data(), p.k.bytes.size()),
               .v = g.up(p.v.bytes.data(), p.v.bytes.size()), .gate = {},
               .out = g.zeros(static_cast<size_t>(p.q_floats()) * 4)};
  if (p.shape.gate) b.gate = g.up(p.gate.data(), p.gate.size() * 4);
  return b;
}

// The dispatch's rows of an output buffer.
std::vector<float> rows_of(Gpu& g, const Problem& p, const vk::BufferRef& out) {
  auto all = g.down(out, static_cast<size_t>(p.q_floats()));
  return {all.begin() + p.row_base * p.shape.n_head * p.shape.hd, all.end()};
}

std::vector<float> run_flash(vk::Device& dev, Gpu& g, const Problem& p, const GpuProblem& b, uint64_t scratch_bytes,
                             const vk::FlashAttentionTuning& tuning = {}) {
  const vk::BufferRef partials = scratch_bytes ? g.zeros(scratch_bytes) : vk::BufferRef{};
  const Status st = vk::flash_attention(dev, p.dispatch(), b.q, b.k, b.v, partials, b.out, b.gate, tuning);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return rows_of(g, p, b.out);
}

// flash_attention_scratch_bytes for the problem's shape and keys, and `rows` rows (default:
// all of them).
uint64_t scratch_for(const vk::Device& dev, const Problem& p, const vk::FlashAttentionTuning& tuning, int64_t rows = 0) {
  auto bytes = vk::flash_attention_scratch_bytes(dev.info(), rows ? rows : p.rows, p.shape.n_head, p.shape.n_kv,
                                                 p.n_keys(), p.shape.hd, tuning);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? *bytes : 0;
}

struct Case {
  const char* name;
  Shape shape;
  int64_t rows, pos0;
  DType k_type, v_type;
  int64_t row_base = 0;
  vk::FlashAttentionTuning tuning = {};
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GpuFlashAttention : public ::testing::TestWithParam<Case> {};

// Every cache type on every shape would compile too many pipelines on lavapipe (about a
// second each for hd 256), so the types rotate over the cases; each type appears on the
// real Qwen3.6 shape, in a split-K case and in a single-dispatch one.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuFlashAttention,
    ::testing::Values(
        // Qwen3.6-35B-A3B: prompts of 1, 7, 100, 512 rows, fresh and after a prefix; decode deep.
        Case{"qwen36_1row_f16", kQwen36, 1, 0, DType::F16, DType::F16},
        Case{"qwen36_1row_pos300_q4_0", kQwen36, 1, 300, DType::Q4_0, DType::Q4_0},
        Case{"qwen36_7rows_q8_0", kQwen36, 7, 0, DType::Q8_0, DType::Q8_0},
        Case{"qwen36_7rows_pos40_q8_0", kQwen36, 7, 40, DType::Q8_0, DType::Q8_0, 3},
        Case{"qwen36_100rows_q4_0", kQwen36, 100, 0, DType::Q4_0, DType::Q4_0},
        Case{"qwen36_100rows_pos700_f16", kQwen36, 100, 700, DType::F16, DType::F16},
        Case{"qwen36_512rows_f16", kQwen36, 512, 0, DType::F16, DType::F16, 1},
        Case{"qwen36_decode_pos5000_q8_0", kQwen36, 1, 5000, DType::Q8_0, DType::Q8_0},
        Case{"qwen36_4rows_pos5000_f32", kQwen36, 4, 5000, DType::F32, DType::F32},
        Case{"qwen36_decode_20000keys_f16", kQwen36, 1, 19999, DType::F16, DType::F16},
        // No split for parallelism (one target workgroup): lavapipe's loop budget alone cuts
        // the 20000 keys (one chunk would run ~5000 tile iterations per invocation).
        Case{"qwen36_decode_20000keys_f16_loop_budget_split", kQwen36, 1, 19999, DType::F16, DType::F16, 0,
             {.target_workgroups = 1}},
        // qwen3moe: hd 128, 8 query heads per KV head, no gate.
        Case{"qwen3moe_7rows_q8_0", kQwen3Moe, 7, 0, DType::Q8_0, DType::Q8_0},
        Case{"qwen3moe_100rows_pos300_f32", kQwen3Moe, 100, 300, DType::F32, DType::F32},
        Case{"qwen3moe_decode_20000keys_q4_0", kQwen3Moe, 1, 20000, DType::Q4_0, DType::Q4_0},
        // tiny: hd 64, 2 query heads per KV head.
        Case{"tiny_7rows_f32", kTiny, 7, 0, DType::F32, DType::F32},
        Case{"tiny_512rows_pos1000_f16", kTiny, 512, 1000, DType::F16, DType::F16},
        Case{"tiny_decode_20000keys_q4_0_q8_0", kTiny, 1, 20000, DType::Q4_0, DType::Q8_0, 2}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST_P(GpuFlashAttention, MatchesCpuAndExactKernel) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) GTEST_SKIP() << "no fast kernels on " << dev->info().name;
  Gpu g{*dev};
  const Case c = GetParam();
  const Problem p = make_problem(c.shape, c.rows, c.pos0, c.k_type, c.v_type, c.row_base);
  const GpuProblem b = upload(g, p);
  const auto flash = run_flash(*dev, g, p, b, scratch_for(*dev, p, c.tuning), c.tuning);
  const int64_t row_floats = p.shape.n_head * p.shape.hd;
  const double bound = nmse_bound(p);
  expect_within(compare(flash, sample_rows(p, kCpuBudget, 2), row_floats, [&](int64_t r) { return cpu_row(p, r); }), bound,
                std::string(c.name) + " vs CPU");
  if (!exact_kernel_fits(dev->info(), p)) return;
  // attention() on sampled rows, one dispatch each (its row r: pos0 + r, row_base + r).
  const std::vector<int64_t> rows = sample_rows(p, kExactBudget, 1);
  const vk::BufferRef scores = g.zeros(static_cast<size_t>(p.shape.n_head * p.n_keys()) * 4),
                      exact_out = g.zeros(static_cast<size_t>(p.q_floats()) * 4);
  for (int64_t r : rows) {
    vk::AttentionDispatch a = p.dispatch();
    a.n_rows = 1, a.pos0 += r, a.row_base += r;
    ASSERT_TRUE(vk::attention(*dev, a, b.q, b.k, b.v, scores, exact_out, b.gate.valid() ? b.gate : b.q).is_ok());
  }
  const auto exact = rows_of(g, p, exact_out);
  expect_within(compare(flash, rows, row_floats,
                        [&](int64_t r) {
                          return std::vector<double>(exact.begin() + r * row_floats, exact.begin() + (r + 1) * row_floats);
                        }),
                bound, std::string(c.name) + " vs attention()");
}

// The tuning knobs change speed, not results, each against the CPU: forced split-K with short
// chunks (several chunks per row, rows that see none of a chunk's keys, the reduce's gate),
// 4 lanes per query, 16-key tiles, other workgroup sizes; on hd 64 with a gate (pipelines
// that compile fast on lavapipe), and once the defaults of a real GPU at the Qwen3.6 shape
// (16-key tiles: K and V tiles of 32 KiB, lavapipe's whole shared memory; 256 invocations).
TEST(GpuFlashAttentionTuning, KnobsKeepTheResult) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) GTEST_SKIP() << "no fast kernels on " << dev->info().name;
  Gpu g{*dev};
  const Problem tiny = make_problem(Shape{64, 4, 2, true}, 9, 70, DType::Q8_0, DType::F16, 2);
  const Problem real = make_problem(kQwen36, 5, 60, DType::F16, DType::Q4_0);
  // 16-key tiles at hd 256 take all of lavapipe's 32 KiB; with subgroups emulated
  // (MOETIER_VK_SUBGROUP) the emulation's scratch leaves room for 8 (as the defaults choose).
  const uint32_t real_tile = dev->info().subgroup_kernel_shared_bytes() >= 32768 ? 16 : 8;
  struct Knob {
    const char* what;
    const Problem* p;
    vk::FlashAttentionTuning tuning;
  };
  const Knob knobs[] = {
      {"hd 64: 32-key chunks", &tiny, {.max_chunk_keys = 32}},
      {"hd 64: 16-key tiles, 16-key chunks", &tiny, {.tile_keys = 16, .max_chunk_keys = 16}},
      {"hd 64: 4 lanes, 64-invocation groups", &tiny, {.lanes = 4, .workgroup_size = 64}},
      {"hd 64: 8-key tiles, 48-key chunks, 256 inv.", &tiny, {.tile_keys = 8, .workgroup_size = 256, .max_chunk_keys = 48}},
      {"hd 256: 16-key tiles (8 emulated), 256 inv., 48-key chunks", &real, {.tile_keys = real_tile, .workgroup_size = 256, .max_chunk_keys = 48}},
  };
  for (const Knob& k : knobs) {
    const Problem& p = *k.p;
    const GpuProblem b = upload(g, p);
    const auto got = run_flash(*dev, g, p, b, scratch_for(*dev, p, k.tuning), k.tuning);
    const auto cpu = [&](int64_t r) { return cpu_row(p, r); };
    expect_within(compare(got, sample_rows(p, kCpuBudget, 2), p.shape.n_head * p.shape.hd, cpu), nmse_bound(p), k.what);
  }
}

// Partials smaller than one dispatch needs: the rows go in pieces (more dispatches), with
// the same result; smaller than one row needs: an error. flash_attention_scratch_bytes is
// enough for one piece (a split dispatch and its reduce).
TEST(GpuFlashAttentionScratch, RowsGoInPiecesWhenPartialsAreSmall) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) GTEST_SKIP() << "no fast kernels on " << dev->info().name;
  Gpu g{*dev};
  const Problem p = make_problem(kTiny, 24, 3000, DType::F16, DType::F16);
  const GpuProblem b = upload(g, p);
  const vk::FlashAttentionTuning split{.max_chunk_keys = 512};  // 6+ chunks per row everywhere
  const uint64_t need = scratch_for(*dev, p, split), need_one = scratch_for(*dev, p, split, 1);
  ASSERT_GT(need_one, 0u);
  ASSERT_GT(need, need_one);

  const uint64_t before = dev->stream().dispatches();
  const auto whole = run_flash(*dev, g, p, b, need, split);
  const uint64_t whole_dispatches = dev->stream().dispatches() - before;
  EXPECT_EQ(whole_dispatches, 2u);  // one split dispatch and its reduce

  const uint64_t before_pieces = dev->stream().dispatches();
  const auto pieces = run_flash(*dev, g, p, b, need_one * 3, split);
  EXPECT_GT(dev->stream().dispatches() - before_pieces, 2u);
  const std::vector<int64_t> rows = sample_rows(p, kCpuBudget, 2);
  const int64_t row_floats = p.shape.n_head * p.shape.hd;
  expect_within(compare(whole, rows, row_floats, [&](int64_t r) { return cpu_row(p, r); }), nmse_bound(p), "one piece");
  expect_within(compare(pieces, rows, row_floats, [&](int64_t r) { return cpu_row(p, r); }), nmse_bound(p), "pieces");

  const vk::BufferRef tiny = g.zeros(need_one / 2);
  const Status st = vk::flash_attention(*dev, p.dispatch(), b.q, b.k, b.v, tiny, b.out, b.gate, split);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.kind(), ErrorKind::kRuntime) << st.message();
}

// flash_attention_scratch_bytes(n_rows, max_keys) holds every call with fewer rows and fewer
// keys in one piece, although the number of chunks does not grow monotonically with the keys
// (chunks round up to whole tiles): many key counts, small chunks, few rows.
TEST(GpuFlashAttentionScratch, ScratchBytesHoldEveryCallUpToTheMaximum) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) GTEST_SKIP() << "no fast kernels on " << dev->info().name;
  Gpu g{*dev};
  const int64_t max_rows = 3, max_keys = 700;
  const Problem p = make_problem(kTiny, max_rows, max_keys - max_rows, DType::F16, DType::F16);
  const GpuProblem b = upload(g, p);
  const vk::FlashAttentionTuning t{.tile_keys = 16, .target_workgroups = 64, .min_chunk_keys = 16};
  const auto bytes = vk::flash_attention_scratch_bytes(dev->info(), max_rows, 4, 2, max_keys, 64, t);
  ASSERT_TRUE(bytes.is_ok());
  const vk::BufferRef partials = g.zeros(*bytes);
  // With these knobs, 22 chunks at 700 keys but 32 at 369 ... 507 keys.
  for (int64_t rows : {int64_t{1}, max_rows}) {
    for (int64_t keys = 300; keys <= max_keys; keys += 23) {
      vk::AttentionDispatch a = p.dispatch();
      a.n_rows = rows, a.pos0 = keys - rows;
      const uint64_t before = dev->stream().dispatches();
      ASSERT_TRUE(vk::flash_attention(*dev, a, b.q, b.k, b.v, partials, b.out, b.gate, t).is_ok());
      EXPECT_LE(dev->stream().dispatches() - before, 2u) << rows << " rows, " << keys << " keys";
    }
  }
  EXPECT_TRUE(dev->stream().finish().is_ok());
}

TEST(GpuFlashAttentionErrors, UnsupportedShapesAreBadInput) {
  GPU_OR_SKIP(dev);
  if (!dev->info().fast_kernels_supported()) GTEST_SKIP() << "no fast kernels on " << dev->info().name;
  Gpu g{*dev};
  const Problem p = make_problem(kTiny, 2, 3, DType::F16, DType::F16);
  const GpuProblem b = upload(g, p);
  auto expect_bad = [&](vk::AttentionDispatch a, const vk::FlashAttentionTuning& t, const char* what) {
    const Status st = vk::flash_attention(*dev, a, b.q, b.k, b.v, {}, b.out, b.gate, t);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_EQ(st.kind(), ErrorKind::kBadInput) << what << ": " << st.message();
  };
  auto a = p.dispatch();
  a.hd = 96;
  expect_bad(a, {}, "head dim 96");
  a = p.dispatch();
  a.n_head = 6, a.n_head_kv = 4;
  expect_bad(a, {}, "6 query heads over 4 KV heads");
  a = p.dispatch();
  a.k_type = DType::BF16;
  expect_bad(a, {}, "a bf16 cache");
  expect_bad(p.dispatch(), {.lanes = 3}, "3 lanes");
  expect_bad(p.dispatch(), {.lanes = dev->info().subgroup_size * 2}, "lanes beyond the subgroup");
  expect_bad(p.dispatch(), {.tile_keys = 128}, "128-key tiles");
  EXPECT_FALSE(vk::flash_attention_scratch_bytes(dev->info(), 1, 16, 2, 100, 80).is_ok());
}

}  // namespace
}  // namespace moetier
#endif
