// Every GPU op other than the matmuls (vk_matmul_test.cpp) against the CPU function it
// mirrors, on lavapipe in CI. Tolerances, derived from what differs:
//  * the same float operations in the same order (rope with the CPU's angle table, f16 KV
//    stores, the MoE combine without the shared expert): bit-identical;
//  * Vulkan's exp/sqrt/division are not correctly rounded (exp: 3 + 2|x| ulp, sqrt from
//    inversesqrt, ≤ 2.5 ulp division), and the GPU sums squares in float-float where the CPU
//    uses double: norms within 8 ulp of the result, SiLU/sigmoid-based ops within 32 ulp
//    (|x| ≤ ~12 here), softmax-based ones (attention, routing weights) within 1e-5 relative;
//  * the delta rule runs the CPU's loops exactly, only its decay/β come through exp: 1e-5
//    relative to the largest output.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "core/thread_pool.h"
#include "cpu/delta_rule.h"
#include "cpu/ops.h"
#include "gpu/vulkan/vk_ops.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

float ulp(float x) { return std::nextafter(std::fabs(x), INFINITY) - std::fabs(x); }

struct Gpu {
  vk::Device& dev;
  vk::BufferRef up(const std::vector<float>& v) { return *dev.create_buffer(v.data(), v.size() * 4, vk::MemoryUse::kScratch); }
  vk::BufferRef up_u32(const std::vector<uint32_t>& v) {
    return *dev.create_buffer(v.data(), v.size() * 4, vk::MemoryUse::kScratch);
  }
  vk::BufferRef zeros(size_t n) { return *dev.create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch); }
  template <class T>
  std::vector<T> down(const vk::BufferRef& b, size_t n) {
    std::vector<T> v(n);
    EXPECT_TRUE(dev.download(b, v.data(), n * sizeof(T)).is_ok());
    return v;
  }
};

TEST(GpuOps, RmsAndL2NormPerHeadWithStrides) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  // 3 rows × 4 heads of 64, heads 128 apart (as q inside [query | gate]).
  const int64_t n = 64, heads = 4, rows = 3, head_stride = 128, row_stride = heads * head_stride;
  const auto x = testing::random_normal(static_cast<size_t>(rows * row_stride), 1, 2.0f);
  const auto w = testing::random_normal(static_cast<size_t>(n), 2);
  auto gx = g.up(x), gw = g.up(w), go = g.zeros(static_cast<size_t>(rows * heads * n)), gl = g.up(x);
  ASSERT_TRUE(vk::rms_norm(*dev, {.n = n, .n_rows = rows, .n_heads = heads, .head_stride = head_stride,
                                  .row_stride = row_stride, .out_head_stride = n, .out_row_stride = heads * n, .eps = 1e-6f},
                           gx, gw, go).is_ok());
  ASSERT_TRUE(vk::l2_norm(*dev, {.n = n, .n_rows = rows, .n_heads = heads, .head_stride = head_stride,
                                 .row_stride = row_stride, .out_head_stride = head_stride, .out_row_stride = row_stride,
                                 .eps = 1e-6f},
                          gl, gl).is_ok());
  const auto rms = g.down<float>(go, static_cast<size_t>(rows * heads * n));
  const auto l2 = g.down<float>(gl, x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> want(static_cast<size_t>(n)), want_l2(x.begin() + r * row_stride + h * head_stride,
                                                                 x.begin() + r * row_stride + h * head_stride + n);
      cpu::rms_norm(&x[static_cast<size_t>(r * row_stride + h * head_stride)], w.data(), n, 1e-6f, want.data());
      cpu::l2_norm(want_l2.data(), n, 1e-6f);
      for (int64_t i = 0; i < n; ++i) {
        const float got = rms[static_cast<size_t>((r * heads + h) * n + i)];
        EXPECT_LE(std::fabs(got - want[static_cast<size_t>(i)]), 8 * ulp(want[static_cast<size_t>(i)])) << r << "," << h << "," << i;
        const float got_l2 = l2[static_cast<size_t>(r * row_stride + h * head_stride + i)];
        EXPECT_LE(std::fabs(got_l2 - want_l2[static_cast<size_t>(i)]), 8 * ulp(want_l2[static_cast<size_t>(i)]));
      }
    }
  }
}

// The norm that also writes its output's Q8_K and Q8_0 rows (the fast kernels' block input):
// the very bytes quantize_rows makes of the norm's output, and the same f32 output.
TEST(GpuOps, NormWithConversionsEqualsNormThenQuantize) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t n = 2048, rows = 5;
  auto x = testing::random_normal(static_cast<size_t>(n * rows), 60);
  x[7] = 9.0f;
  x[300] = -9.0f;  // ties for the largest magnitude in different blocks
  const auto w = testing::random_normal(static_cast<size_t>(n), 61, 0.1f);
  const vk::NormShape shape{.n = n, .n_rows = rows, .row_stride = n, .out_row_stride = n, .eps = 1e-6f};
  const uint64_t k_stride = vk::gpu_activation_row_bytes(DType::Q8_K, n), z_stride = vk::gpu_activation_row_bytes(DType::Q8_0, n);
  auto gx = g.up(x), gw = g.up(w), out1 = g.zeros(x.size()), out2 = g.zeros(x.size());
  auto qk1 = g.zeros(k_stride * rows / 4), qk2 = g.zeros(k_stride * rows / 4), qz1 = g.zeros(z_stride * rows / 4),
       qz2 = g.zeros(z_stride * rows / 4);
  ASSERT_TRUE(vk::rms_norm(*dev, shape, gx, gw, out1).is_ok());
  ASSERT_TRUE(vk::quantize_rows(*dev, DType::Q8_K, out1, rows, n, n, qk1).is_ok());
  ASSERT_TRUE(vk::quantize_rows(*dev, DType::Q8_0, out1, rows, n, n, qz1).is_ok());
  ASSERT_TRUE(vk::rms_norm(*dev, shape, gx, gw, out2, {.q8_k = qk2, .q8_k_stride = k_stride, .q8_0 = qz2, .q8_0_stride = z_stride}).is_ok());
  EXPECT_EQ(g.down<uint32_t>(out1, x.size()), g.down<uint32_t>(out2, x.size()));
  EXPECT_EQ(g.down<uint32_t>(qk1, k_stride * rows / 4), g.down<uint32_t>(qk2, k_stride * rows / 4));
  EXPECT_EQ(g.down<uint32_t>(qz1, z_stride * rows / 4), g.down<uint32_t>(qz2, z_stride * rows / 4));
  // Per head, or rows that are not whole Q8_K blocks: a clear error.
  EXPECT_FALSE(vk::rms_norm(*dev, {.n = 64, .n_rows = 1, .n_heads = 2, .head_stride = 64, .row_stride = 128,
                                   .out_head_stride = 64, .out_row_stride = 128},
                            gx, {}, out2, {.q8_k = qk2, .q8_k_stride = k_stride}).is_ok());
}

TEST(GpuOps, RopeIsBitIdenticalGivenTheCpuAngles) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t hd = 64, n_rot = 32, heads = 3, rows = 4;
  auto x = testing::random_normal(static_cast<size_t>(rows * heads * hd), 3);
  std::vector<float> cs(static_cast<size_t>(rows * n_rot));
  for (int64_t r = 0; r < rows; ++r) cpu::rope_angles(n_rot, 1000 * r + 7, 1e7f, &cs[static_cast<size_t>(r * n_rot)]);
  auto gx = g.up(x), gcs = g.up(cs);
  ASSERT_TRUE(vk::rope_neox(*dev, gx, rows, heads, hd, heads * hd, n_rot, gcs).is_ok());
  const auto got = g.down<float>(gx, x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) cpu::rope_neox_with(&x[static_cast<size_t>((r * heads + h) * hd)], n_rot, &cs[static_cast<size_t>(r * n_rot)]);
  }
  EXPECT_EQ(got, x);
}

TEST(GpuOps, AddSiluMulAndKvStore) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t n = 96, rows = 5;
  const auto a = testing::random_normal(static_cast<size_t>(n * rows), 4, 3.0f), b = testing::random_normal(static_cast<size_t>(n * rows), 5);
  auto ga = g.up(a), gb = g.up(b), go = g.zeros(a.size());
  ASSERT_TRUE(vk::silu_mul(*dev, {.buffer = ga, .stride = n}, {.buffer = gb, .stride = n}, {.buffer = go, .stride = n}, n, rows).is_ok());
  ASSERT_TRUE(vk::add(*dev, {.buffer = ga, .stride = n}, {.buffer = gb, .stride = n}, n, rows).is_ok());
  const auto swiglu = g.down<float>(go, a.size()), sum = g.down<float>(ga, a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = cpu::silu(a[i]) * b[i];
    EXPECT_LE(std::fabs(swiglu[i] - want), 32 * ulp(want)) << i;
    EXPECT_EQ(sum[i], a[i] + b[i]);
  }
  // f16 cache rows at positions 3.. of a 10-row cache, from rows 1.. of the source.
  auto cache = g.zeros(10 * n / 2);
  ASSERT_TRUE(vk::kv_store(*dev, {.buffer = gb, .stride = n, .offset = n}, 2, n, cache, 3, DType::F16).is_ok());
  const auto words = g.down<uint32_t>(cache, 10 * n / 2);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t w = words[static_cast<size_t>((3 + r) * n / 2 + i / 2)];
      const uint16_t h = static_cast<uint16_t>(i % 2 ? w >> 16 : w & 0xFFFF);
      EXPECT_EQ(h, f32_to_fp16(b[static_cast<size_t>((1 + r) * n + i)])) << r << "," << i;
    }
  }
}

TEST(GpuOps, QuantizedKvRowsEqualTheCpuQuantizers) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t width = 256, rows = 3;
  auto x = testing::random_normal(static_cast<size_t>(width * rows), 21, 2.0f);
  x[5] = -x[9];  // a magnitude tie inside the first block (q4_0 takes the first)
  auto gx = g.up(x);
  for (const DType t : {DType::Q8_0, DType::Q4_0}) {
    const int64_t row_bytes = dtype_row_bytes(t, width);
    auto cache = g.zeros(static_cast<size_t>(row_bytes * (rows + 2) / 4));
    ASSERT_TRUE(vk::kv_store(*dev, {.buffer = gx, .stride = width}, rows, width, cache, 2, t).is_ok());
    const auto words = g.down<uint32_t>(cache, static_cast<size_t>(row_bytes * (rows + 2) / 4));
    const auto* bytes = reinterpret_cast<const uint8_t*>(words.data());
    std::vector<uint8_t> want(static_cast<size_t>(row_bytes));
    for (int64_t r = 0; r < rows; ++r) {
      type_ops(t)->quantize_row(&x[static_cast<size_t>(r * width)], want.data(), width);
      EXPECT_EQ(std::memcmp(bytes + (2 + r) * row_bytes, want.data(), want.size()), 0) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(GpuOps, CausalAttentionWithGqaAndOutputGate) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t hd = 32, n_head = 4, n_kv = 2, pos0 = 5, rows = 3, n_keys = pos0 + rows;
  const auto q = testing::random_normal(static_cast<size_t>(rows * n_head * hd), 6), k = testing::random_normal(static_cast<size_t>(n_keys * n_kv * hd), 7),
             v = testing::random_normal(static_cast<size_t>(n_keys * n_kv * hd), 8), gate = testing::random_normal(static_cast<size_t>(rows * n_head * hd), 9);
  std::vector<uint32_t> kc(k.size()), vc(v.size());
  for (size_t i = 0; i < k.size(); ++i) kc[i] = std::bit_cast<uint32_t>(k[i]), vc[i] = std::bit_cast<uint32_t>(v[i]);
  auto gq = g.up(q), gk = g.up_u32(kc), gv = g.up_u32(vc), ggate = g.up(gate), go = g.zeros(q.size()), gs = g.zeros(4096);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ASSERT_TRUE(vk::attention(*dev,
                            {.hd = hd, .n_head = n_head, .n_head_kv = n_kv, .n_rows = rows, .row_base = 0, .pos0 = pos0,
                             .scale = scale, .k_type = DType::F32, .v_type = DType::F32, .has_gate = true,
                             .gate_row_stride = n_head * hd,
                             .gate_head_stride = hd, .gate_offset = 0},
                            gq, gk, gv, gs, go, ggate).is_ok());
  const auto got = g.down<float>(go, q.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t kvh = h / (n_head / n_kv), keys = pos0 + r + 1;
      std::vector<double> s(static_cast<size_t>(keys));
      double mx = -1e300, sum = 0;
      for (int64_t p = 0; p < keys; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += double{q[static_cast<size_t>((r * n_head + h) * hd + i)]} * k[static_cast<size_t>((p * n_kv + kvh) * hd + i)];
        s[static_cast<size_t>(p)] = dot * scale;
        mx = std::max(mx, s[static_cast<size_t>(p)]);
      }
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int64_t c = 0; c < hd; ++c) {
        double o = 0;
        for (int64_t p = 0; p < keys; ++p) o += s[static_cast<size_t>(p)] / sum * v[static_cast<size_t>((p * n_kv + kvh) * hd + c)];
        o *= 1.0 / (1.0 + std::exp(-double{gate[static_cast<size_t>((r * n_head + h) * hd + c)]}));
        EXPECT_NEAR(got[static_cast<size_t>((r * n_head + h) * hd + c)], o, 1e-5 * (1 + std::fabs(o))) << r << "," << h << "," << c;
      }
    }
  }
}

struct DeltaShape {
  int64_t nk, nv, dk, rows;
};
class GpuDeltaRule : public ::testing::TestWithParam<DeltaShape> {};

// The tiny models' shape, and the real Qwen3.6-35B-A3B shape (d_state 128, 16 K / 32 V heads)
// with a prompt-sized micro-batch, and 4 V heads per K head.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuDeltaRule,
                         ::testing::Values(DeltaShape{2, 4, 32, 3}, DeltaShape{16, 32, 128, 130},
                                           DeltaShape{4, 16, 128, 200}, DeltaShape{2, 4, 32, 300}, DeltaShape{1, 1, 128, 300}, DeltaShape{1, 1, 64, 300}));

TEST_P(GpuDeltaRule, ConvAndDeltaRuleFollowTheCpuLoops) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const auto [nk, nv, dk, rows] = GetParam();
  const int64_t key_dim = nk * dk, vd = nv * dk, ch = 2 * key_dim + vd, taps = 4;
  const auto qkv = testing::random_normal(static_cast<size_t>(rows * ch), 10), w = testing::random_normal(static_cast<size_t>(ch * taps), 11, 0.5f),
             st0 = testing::random_normal(static_cast<size_t>((taps - 1) * ch), 12), z = testing::random_normal(static_cast<size_t>(rows * vd), 13),
             beta = testing::random_normal(static_cast<size_t>(rows * nv), 14), alpha = testing::random_normal(static_cast<size_t>(rows * nv), 15),
             s0 = testing::random_normal(static_cast<size_t>(nv * dk * dk), 16, 0.1f);
  std::vector<float> params(static_cast<size_t>(2 * nv + dk));
  for (int64_t j = 0; j < nv; ++j) params[static_cast<size_t>(j)] = 0.1f * j, params[static_cast<size_t>(nv + j)] = -0.5f - 0.1f * j;
  for (int64_t c = 0; c < dk; ++c) params[static_cast<size_t>(2 * nv + c)] = 1.0f + 0.01f * c;
  auto gqkv = g.up(qkv), gw = g.up(w), gst = g.up(st0), gconv = g.zeros(qkv.size());
  ASSERT_TRUE(vk::ssm_conv(*dev, {.n_rows = rows, .channels = ch, .taps = taps, .row_begin = 0}, gqkv, gw, gst, gconv).is_ok());
  ASSERT_TRUE(vk::l2_norm(*dev, {.n = dk, .n_rows = rows, .n_heads = 2 * nk, .head_stride = dk, .row_stride = ch,
                                 .out_head_stride = dk, .out_row_stride = ch, .eps = 1e-6f},
                          gconv, gconv).is_ok());
  auto gb = g.up(beta), ga = g.up(alpha), gp = g.up(params), gs = g.up(s0), gz = g.up(z), gy = g.zeros(static_cast<size_t>(rows * vd));
  ASSERT_TRUE(vk::delta_rule(*dev, {.n_rows = rows, .row_begin = 0, .dk = dk, .dv = dk, .n_k_heads = nk, .n_v_heads = nv,
                                    .channels = ch, .key_dim = key_dim, .value_dim = vd,
                                    .q_scale = 1.0f / std::sqrt(static_cast<float>(dk)), .eps = 1e-6f},
                             gconv, gb, ga, gp, gs, gz, gy).is_ok());
  const auto conv_got = g.down<float>(gconv, qkv.size()), y_got = g.down<float>(gy, static_cast<size_t>(rows * vd));
  const auto st_got = g.down<float>(gst, st0.size());

  // CPU: the loops of delta_net_block.
  std::vector<float> in(st0);
  in.insert(in.end(), qkv.begin(), qkv.end());
  std::vector<float> conv(static_cast<size_t>(rows * ch));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t c = 0; c < ch; ++c) {
      float acc = 0;
      for (int64_t j = 0; j < taps; ++j) acc += w[static_cast<size_t>(c * taps + j)] * in[static_cast<size_t>((t + j) * ch + c)];
      conv[static_cast<size_t>(t * ch + c)] = cpu::silu(acc);
    }
    for (int64_t h = 0; h < 2 * nk; ++h) cpu::l2_norm(&conv[static_cast<size_t>(t * ch + h * dk)], dk, 1e-6f);
  }
  for (size_t i = 0; i < conv.size(); ++i) EXPECT_NEAR(conv_got[i], conv[i], 64 * ulp(conv[i]) + 1e-7f) << "conv " << i;
  for (int64_t k = 0; k < taps - 1; ++k) {
    for (int64_t c = 0; c < ch; ++c) EXPECT_EQ(st_got[static_cast<size_t>(k * ch + c)], in[static_cast<size_t>((rows + k) * ch + c)]);
  }
  std::vector<float> S(s0), y(static_cast<size_t>(rows * vd)), scratch(static_cast<size_t>(dk));
  float max_y = 0;
  for (int64_t j = 0; j < nv; ++j) {
    for (int64_t t = 0; t < rows; ++t) {
      const float* row = &conv[static_cast<size_t>(t * ch)];
      const float b = cpu::sigmoid(beta[static_cast<size_t>(t * nv + j)]);
      const float gg = cpu::softplus(alpha[static_cast<size_t>(t * nv + j)] + params[static_cast<size_t>(j)]) * params[static_cast<size_t>(nv + j)];
      float* o = &y[static_cast<size_t>(t * vd + j * dk)];
      cpu::delta_rule_step({.state = &S[static_cast<size_t>(j * dk * dk)], .d_k = dk, .d_v = dk, .q = row + (j % nk) * dk,
                            .k = row + key_dim + (j % nk) * dk, .v = row + 2 * key_dim + j * dk, .beta = b,
                            .decay = std::exp(gg), .q_scale = 1.0f / std::sqrt(static_cast<float>(dk)), .out = o,
                            .scratch = scratch.data()});
      cpu::rms_norm(o, &params[static_cast<size_t>(2 * nv)], dk, 1e-6f, o);
      for (int64_t c = 0; c < dk; ++c) o[c] *= cpu::silu(z[static_cast<size_t>(t * vd + j * dk + c)]);
    }
  }
  for (float v : y) max_y = std::max(max_y, std::fabs(v));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y_got[i], y[i], 1e-5f * max_y) << "y " << i;
}

TEST(GpuOps, RouterTopKAndCombine) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t n_expert = 64, k = 6, rows = 3, d = 40;
  auto logits = testing::random_normal(static_cast<size_t>(rows * n_expert), 17, 2.0f);
  logits[5] = logits[9] = 6.0f;  // a tie: the lower id first
  auto gl = g.up(logits), gids = g.zeros(static_cast<size_t>(rows * k)), gw = g.zeros(static_cast<size_t>(rows * k)),
       grows = g.zeros(static_cast<size_t>(rows * k));
  ASSERT_TRUE(vk::moe_router(*dev, vk::KernelSet::kExact, gl, n_expert, k, rows, gids, gw, grows).is_ok());
  const auto ids = g.down<uint32_t>(gids, static_cast<size_t>(rows * k));
  const auto wts = g.down<float>(gw, static_cast<size_t>(rows * k));
  const auto pair_rows = g.down<uint32_t>(grows, static_cast<size_t>(rows * k));
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<float> p(logits.begin() + t * n_expert, logits.begin() + (t + 1) * n_expert);
    cpu::softmax(p.data(), n_expert);
    std::vector<int> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] || (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(ids[static_cast<size_t>(t * k + j)], static_cast<uint32_t>(order[static_cast<size_t>(j)])) << t << "," << j;
      const float want = p[static_cast<size_t>(order[static_cast<size_t>(j)])] / std::max(sum, 6.1035e-5f);
      EXPECT_NEAR(wts[static_cast<size_t>(t * k + j)], want, 1e-5f * want);
      EXPECT_EQ(pair_rows[static_cast<size_t>(t * k + j)], static_cast<uint32_t>(t));
    }
  }
  // Combine: Σ_k w·e in top-k order (bit-identical), then + sigmoid(g)·shared.
  const auto e = testing::random_normal(static_cast<size_t>(rows * k * d), 18), sh = testing::random_normal(static_cast<size_t>(rows * d), 19),
             sg = testing::random_normal(static_cast<size_t>(rows), 20);
  auto ge = g.up(e), gsh = g.up(sh), gsg = g.up(sg), go = g.zeros(static_cast<size_t>(rows * d)), go2 = g.zeros(static_cast<size_t>(rows * d));
  ASSERT_TRUE(vk::moe_combine(*dev, {.experts = ge, .weights = gw, .out = go, .n_embd = d, .k = k, .n_rows = rows,
                                       .has_routed = true}).is_ok());
  ASSERT_TRUE(vk::moe_combine(*dev, {.experts = ge, .weights = gw, .shared = gsh, .shared_gate = gsg, .out = go2,
                                       .n_embd = d, .k = k, .n_rows = rows, .has_routed = true, .has_shared = true}).is_ok());
  const auto out = g.down<float>(go, static_cast<size_t>(rows * d)), out2 = g.down<float>(go2, static_cast<size_t>(rows * d));
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<float> o(static_cast<size_t>(d), 0.0f);
    for (int64_t j = 0; j < k; ++j) cpu::axpy(wts[static_cast<size_t>(t * k + j)], &e[static_cast<size_t>((t * k + j) * d)], d, o.data());
    std::vector<float> o2 = o;
    cpu::axpy(cpu::sigmoid(sg[static_cast<size_t>(t)]), &sh[static_cast<size_t>(t * d)], d, o2.data());
    for (int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(out[static_cast<size_t>(t * d + c)], o[static_cast<size_t>(c)]);
      EXPECT_NEAR(out2[static_cast<size_t>(t * d + c)], o2[static_cast<size_t>(c)], 32 * ulp(std::fabs(o2[static_cast<size_t>(c)]) + 1.0f));
    }
  }
  // Fused into the residual stream: x += out, exactly the separate add.
  const auto x0 = testing::random_normal(static_cast<size_t>(rows * d), 21);
  auto gx = g.up(x0);
  ASSERT_TRUE(vk::moe_combine(*dev, {.experts = ge, .weights = gw, .shared = gsh, .shared_gate = gsg, .out = go,
                                       .residual = gx, .n_embd = d, .k = k, .n_rows = rows, .has_routed = true,
                                       .has_shared = true}).is_ok());
  const auto x1 = g.down<float>(gx, static_cast<size_t>(rows * d));
  for (size_t i = 0; i < x1.size(); ++i) EXPECT_EQ(x1[i], x0[i] + out2[i]) << i;
}

// The VRAM expert cache's combine: `out` holds the CPU's pairs' sum; the pairs the map names
// (rows of the GPU's compact pair outputs) are added to it in top-k order, the CPU's (−1)
// skipped, then the shared expert.
TEST(GpuOps, CombineWithAPairMapAddsTheGpuPairsToTheCpuSum) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  const int64_t k = 4, rows = 3, d = 40;
  // Pairs (row, k) computed on the GPU, in compact order; a row with none and one with all.
  const std::vector<int32_t> map = {-1, 0, -1, 1, /**/ -1, -1, -1, -1, /**/ 2, 3, 4, 5};
  const int64_t n_gpu = 6;
  const auto e = testing::random_normal(static_cast<size_t>(n_gpu * d), 31);
  const auto w = testing::random_normal(static_cast<size_t>(rows * k), 32);
  const auto cpu_sum = testing::random_normal(static_cast<size_t>(rows * d), 33);
  const auto sh = testing::random_normal(static_cast<size_t>(rows * d), 34), sg = testing::random_normal(static_cast<size_t>(rows), 35);
  std::vector<uint32_t> map_bits(map.size());
  std::memcpy(map_bits.data(), map.data(), map.size() * 4);
  auto ge = g.up(e), gw = g.up(w), gmap = g.up_u32(map_bits), go = g.up(cpu_sum), go2 = g.up(cpu_sum), gsh = g.up(sh),
       gsg = g.up(sg);
  ASSERT_TRUE(vk::moe_combine(*dev, {.experts = ge, .weights = gw, .out = go, .pair_map = gmap, .n_embd = d, .k = k,
                                     .n_rows = rows, .has_routed = true}).is_ok());
  ASSERT_TRUE(vk::moe_combine(*dev, {.experts = ge, .weights = gw, .shared = gsh, .shared_gate = gsg, .out = go2,
                                     .pair_map = gmap, .n_embd = d, .k = k, .n_rows = rows, .has_routed = true,
                                     .has_shared = true}).is_ok());
  const auto out = g.down<float>(go, static_cast<size_t>(rows * d)), out2 = g.down<float>(go2, static_cast<size_t>(rows * d));
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<float> o(cpu_sum.begin() + t * d, cpu_sum.begin() + (t + 1) * d);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t m = map[static_cast<size_t>(t * k + j)];
      if (m >= 0) cpu::axpy(w[static_cast<size_t>(t * k + j)], &e[static_cast<size_t>(m * d)], d, o.data());
    }
    std::vector<float> o2 = o;
    cpu::axpy(cpu::sigmoid(sg[static_cast<size_t>(t)]), &sh[static_cast<size_t>(t * d)], d, o2.data());
    for (int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(out[static_cast<size_t>(t * d + c)], o[static_cast<size_t>(c)]) << t << "," << c;
      EXPECT_NEAR(out2[static_cast<size_t>(t * d + c)], o2[static_cast<size_t>(c)], 32 * ulp(std::fabs(o2[static_cast<size_t>(c)]) + 1.0f));
    }
  }
}

// The fast router computes the exact one's probabilities and picks the same experts in
// parallel: ids, weights and probabilities bit for bit, for the real models' expert counts
// (128, 256, 512) with ties and k = 8.
TEST(GpuOps, FastRouterEqualsTheExactRouter) {
  GPU_OR_SKIP(dev);
  Gpu g{*dev};
  for (const int64_t n_expert : {8, 128, 256, 512}) {
    const int64_t k = std::min<int64_t>(8, n_expert / 2), rows = 5;
    auto logits = testing::random_normal(static_cast<size_t>(rows * n_expert), 40 + static_cast<uint64_t>(n_expert), 2.0f);
    logits[3] = logits[n_expert - 1] = logits[n_expert / 2] = 20.0f;  // three-way tie in row 0
    std::vector<std::vector<float>> got_p, got_w;
    std::vector<std::vector<uint32_t>> got_ids;
    for (const auto ks : {vk::KernelSet::kExact, vk::KernelSet::kFast}) {
      auto gl = g.up(logits), gids = g.zeros(static_cast<size_t>(rows * k)), gw = g.zeros(static_cast<size_t>(rows * k)),
           grows = g.zeros(static_cast<size_t>(rows * k));
      ASSERT_TRUE(vk::moe_router(*dev, ks, gl, n_expert, k, rows, gids, gw, grows).is_ok());
      got_p.push_back(g.down<float>(gl, logits.size()));
      got_w.push_back(g.down<float>(gw, static_cast<size_t>(rows * k)));
      got_ids.push_back(g.down<uint32_t>(gids, static_cast<size_t>(rows * k)));
    }
    EXPECT_EQ(got_ids[1], got_ids[0]) << n_expert << " experts";
    EXPECT_EQ(got_w[1], got_w[0]) << n_expert << " experts";
    EXPECT_EQ(got_p[1], got_p[0]) << n_expert << " experts";
    EXPECT_EQ(got_ids[0][0], 3u) << "ties go to the lower id";
  }
}

}  // namespace
}  // namespace moetier
#endif
