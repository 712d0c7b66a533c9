// The fast mat-vec and mat-mat kernels (shaders/matvec.comp, matmat.comp) against the exact ones (matmul.comp, which
// vk_matmul_test.cpp holds bit-identical to the CPU's scalar references), for every weight
// type: plain, expert stacks by pair, the fused SwiGLU and the fused residual add.
//
// Tolerance, derived: both compute every integer product exactly; the fast kernel turns each
// lane's integer partial sum (not each block's) into a float with the block's scales, and
// sums the lanes' floats in a tree (subgroupAdd, then across subgroups) instead of in block
// order. That is a different rounding of the same N = (lanes per block) × (blocks per row)
// terms of similar magnitude T (random data): an output is about √N·T, its rounding error a
// random walk of ~N roundings of size u·T (u = 2^-24), so the normalised mean squared error
// NMSE = Σ(fast − exact)² / Σ exact² is about u² ≈ 4e-15 (times a small factor for the
// scales' roundings). A kernel bug that gets a single lane's term wrong in a single output
// of M outputs gives NMSE ≈ 1/(N·M) ≥ 1/(2048·77·11) ≈ 6e-7 here. The bound 1e-10 sits four
// orders of magnitude above the rounding and three below the smallest bug.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/gpu.h"
#include "support/random.h"

#if MOETIER_HAVE_VULKAN
#include "cpu/ops.h"
#include "gpu/vulkan/vk_ops.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

using testing::random_normal;

constexpr double kMaxNmse = 1e-10;

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return den > 0 ? num / den : num;
}

std::vector<uint8_t> quantize_rows(DType type, const std::vector<float>& values, int64_t n_in, int64_t rows) {
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes * rows));
  for (int64_t r = 0; r < rows; ++r) type_ops(type)->quantize_row(values.data() + r * n_in, out.data() + r * row_bytes, n_in);
  return out;
}

// A weight matrix (or stack), activations converted on the GPU, and output buffers.
struct MatvecCase {
  vk::Device& dev;
  DType type;
  int64_t n_in, n_out, n_mat, n_x;
  vk::GpuMatrix w, w2;
  vk::BufferRef xq;
  uint64_t xq_stride = 0;
  MatvecCase(vk::Device& d, DType t, int64_t in, int64_t out, int64_t mat, int64_t x_rows, uint64_t seed)
      : dev(d), type(t), n_in(in), n_out(out), n_mat(mat), n_x(x_rows) {
    const int64_t row_bytes = dtype_row_bytes(type, n_in);
    const auto a = quantize_rows(type, random_normal(static_cast<size_t>(n_in * n_out * n_mat), seed, 0.05f), n_in, n_out * n_mat);
    const auto b = quantize_rows(type, random_normal(static_cast<size_t>(n_in * n_out * n_mat), seed + 1, 0.05f), n_in, n_out * n_mat);
    w = *vk::upload_matrix(dev, type, n_in, n_out, n_mat, row_bytes, a.data());
    w2 = *vk::upload_matrix(dev, type, n_in, n_out, n_mat, row_bytes, b.data());
    const auto x = random_normal(static_cast<size_t>(n_in * n_x), seed + 2);
    const DType act = *vk::gpu_activation_type(type);
    xq_stride = vk::gpu_activation_row_bytes(act, n_in);
    auto gx = dev.create_buffer(x.data(), x.size() * 4, vk::MemoryUse::kScratch);
    xq = *dev.allocator().allocate(xq_stride * static_cast<uint64_t>(n_x), vk::MemoryUse::kScratch);
    EXPECT_TRUE(vk::quantize_rows(dev, act, *gx, n_x, n_in, n_in, xq).is_ok());
  }
  vk::BufferRef buffer(const std::vector<float>& v) { return *dev.create_buffer(v.data(), v.size() * 4, vk::MemoryUse::kScratch); }
  vk::BufferRef zeros(size_t n) { return *dev.create_buffer(nullptr, n * 4, vk::MemoryUse::kScratch); }
  std::vector<float> down(const vk::BufferRef& b, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(dev.download(b, v.data(), n * 4).is_ok());
    return v;
  }
};

class GpuMatvec : public ::testing::TestWithParam<DType> {};

// Dense: 1, 3, 8 and 11 tokens (11 = a group of 8 and one of 3), rows of 2 and 16 blocks of
// 256 (short rows use a smaller workgroup), an odd row count.
TEST_P(GpuMatvec, FastEqualsExactForOneToElevenTokens) {
  GPU_OR_SKIP(dev);
  for (const int64_t n_in : {512, 4096}) {
    MatvecCase s(*dev, GetParam(), n_in, 77, 1, 11, 10 + static_cast<uint64_t>(n_in));
    for (const int64_t n_tok : {1, 3, 8, 11}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(s.type) << " n_in " << n_in << " tokens " << n_tok);
      const size_t n = static_cast<size_t>(n_tok * s.n_out);
      auto exact = s.zeros(n), fast = s.zeros(n);
      const vk::MatmulArgs args{.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = exact, .y_stride = s.n_out};
      ASSERT_TRUE(vk::matmul_exact(*dev, args).is_ok());
      auto fast_args = args;
      fast_args.y = fast;
      ASSERT_TRUE(vk::matvec(*dev, fast_args).is_ok());
      const auto want = s.down(exact, n), got = s.down(fast, n);
      EXPECT_LE(nmse(got, want), kMaxNmse);
    }
  }
}

// The fused epilogues: y += W·x (residual add) and y = silu(W·x) · (W2·x) (SwiGLU).
TEST_P(GpuMatvec, FusedResidualAddAndSwiGlu) {
  GPU_OR_SKIP(dev);
  MatvecCase s(*dev, GetParam(), 512, 45, 1, 2, 30);
  const int64_t n_tok = 2;
  const size_t n = static_cast<size_t>(n_tok * s.n_out);
  auto g = s.zeros(n), u = s.zeros(n);
  ASSERT_TRUE(vk::matmul_exact(*dev, {.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = g, .y_stride = s.n_out}).is_ok());
  ASSERT_TRUE(vk::matmul_exact(*dev, {.w = &s.w2, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = u, .y_stride = s.n_out}).is_ok());
  const auto gate = s.down(g, n), up = s.down(u, n);
  const auto residual = random_normal(n, 31);
  std::vector<float> want_add(n), want_swiglu(n);
  for (size_t i = 0; i < n; ++i) {
    want_add[i] = residual[i] + gate[i];
    want_swiglu[i] = cpu::silu(gate[i]) * up[i];
  }
  auto acc = s.buffer(residual), sw = s.zeros(n);
  ASSERT_TRUE(vk::matvec(*dev, {.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = acc,
                                .y_stride = s.n_out, .accumulate = true}).is_ok());
  ASSERT_TRUE(vk::matvec(*dev, {.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = sw,
                                .y_stride = s.n_out, .up = &s.w2}).is_ok());
  // SiLU adds the GPU's exp() (≤ 3 + 2|x| ulp) to the rounding above: still far below 1e-10.
  EXPECT_LE(nmse(s.down(acc, n), want_add), kMaxNmse);
  EXPECT_LE(nmse(s.down(sw, n), want_swiglu), kMaxNmse);
}

// Expert stacks by pair, with repeated and out-of-order experts; plain and SwiGLU.
TEST_P(GpuMatvec, ExpertPairsEqualTheExactKernel) {
  GPU_OR_SKIP(dev);
  MatvecCase s(*dev, GetParam(), 512, 40, 6, 3, 50);
  const std::vector<uint32_t> ids = {5, 0, 5, 2, 1, 3, 0, 4};
  const std::vector<uint32_t> rows = {0, 0, 1, 2, 1, 2, 2, 0};
  const int64_t n_pairs = static_cast<int64_t>(ids.size());
  auto gids = *dev->create_buffer(ids.data(), ids.size() * 4, vk::MemoryUse::kScratch);
  auto grows = *dev->create_buffer(rows.data(), rows.size() * 4, vk::MemoryUse::kScratch);
  const size_t n = static_cast<size_t>(n_pairs * s.n_out);
  auto g = s.zeros(n), u = s.zeros(n), fast = s.zeros(n), fast_sw = s.zeros(n);
  const vk::MatmulIdArgs args{.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .ids = gids, .rows = grows,
                              .n_pairs = n_pairs, .y = g, .y_stride = s.n_out};
  ASSERT_TRUE(vk::matmul_id_exact(*dev, args).is_ok());
  auto up_args = args;
  up_args.w = &s.w2;
  up_args.y = u;
  ASSERT_TRUE(vk::matmul_id_exact(*dev, up_args).is_ok());
  auto fast_args = args;
  fast_args.y = fast;
  ASSERT_TRUE(vk::matvec_id(*dev, fast_args).is_ok());
  fast_args.y = fast_sw;
  fast_args.up = &s.w2;
  ASSERT_TRUE(vk::matvec_id(*dev, fast_args).is_ok());
  const auto gate = s.down(g, n), up = s.down(u, n);
  std::vector<float> want_swiglu(n);
  for (size_t i = 0; i < n; ++i) want_swiglu[i] = cpu::silu(gate[i]) * up[i];
  EXPECT_LE(nmse(s.down(fast, n), gate), kMaxNmse);
  EXPECT_LE(nmse(s.down(fast_sw, n), want_swiglu), kMaxNmse);
}

// The tiled mat-mat (prompt batches): quantized weights bit for bit the exact kernel (same
// integer sums, same float expression per superblock, superblocks added in order by one
// invocation), with and without packed int8 dot products; float weights within the NMSE
// bound above (fp32 fma instead of float-float sums). 9, 33 and 100 tokens: partial token
// tiles; 77 rows: a partial row tile.
bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void expect_matches_exact(DType type, const std::vector<float>& got, const std::vector<float>& want) {
  if (float_type(type)) {
    EXPECT_LE(nmse(got, want), kMaxNmse);
    return;
  }
  int mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && ++mismatches <= 3) ADD_FAILURE() << "output " << i << ": " << got[i] << " vs exact " << want[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(GpuMatvec, TiledMatmatEqualsExact) {
  GPU_OR_SKIP(dev);
  std::vector<bool> int_dots = {false};
  if (dev->info().integer_dot) int_dots.push_back(true);
  for (const int64_t n_in : {512, 4096}) {
    MatvecCase s(*dev, GetParam(), n_in, 77, 1, 100, 90 + static_cast<uint64_t>(n_in));
    for (const int64_t n_tok : {9, 33, 100}) {
      const size_t n = static_cast<size_t>(n_tok * s.n_out);
      auto exact = s.zeros(n);
      const vk::MatmulArgs args{.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .n_tok = n_tok, .y = exact, .y_stride = s.n_out};
      ASSERT_TRUE(vk::matmul_exact(*dev, args).is_ok());
      const auto want = s.down(exact, n);
      for (const bool int_dot : int_dots) {
        SCOPED_TRACE(::testing::Message() << dtype_name(s.type) << " n_in " << n_in << " tokens " << n_tok
                                          << (int_dot ? " int-dot" : ""));
        auto fast = s.zeros(n);
        auto fast_args = args;
        fast_args.y = fast;
        ASSERT_TRUE(vk::matmat(*dev, fast_args, int_dot).is_ok());
        expect_matches_exact(s.type, s.down(fast, n), want);
      }
    }
  }
}

// Prompt-batch expert products: 40 tokens × 3 experts each (distinct per token, as routing
// picks them) out of 6, grouped by expert on the GPU, against the exact kernel pair by pair.
TEST_P(GpuMatvec, GroupedExpertTilesEqualExact) {
  GPU_OR_SKIP(dev);
  const int64_t n_tokens = 40, k = 3, n_mat = 6;
  MatvecCase s(*dev, GetParam(), 512, 40, n_mat, n_tokens, 120);
  std::vector<uint32_t> ids, rows;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      ids.push_back(static_cast<uint32_t>((t * 5 + j * (1 + t % 2)) % n_mat));
      rows.push_back(static_cast<uint32_t>(t));
    }
  }
  const int64_t n_pairs = static_cast<int64_t>(ids.size());
  auto gids = *dev->create_buffer(ids.data(), ids.size() * 4, vk::MemoryUse::kScratch);
  auto grows = *dev->create_buffer(rows.data(), rows.size() * 4, vk::MemoryUse::kScratch);
  auto offsets = s.zeros(static_cast<size_t>(n_mat + 1)), order = s.zeros(static_cast<size_t>(n_pairs));
  const size_t n = static_cast<size_t>(n_pairs * s.n_out);
  auto exact = s.zeros(n);
  const vk::MatmulIdArgs args{.w = &s.w, .xq = s.xq, .x_row_bytes = s.xq_stride, .ids = gids, .rows = grows,
                              .n_pairs = n_pairs, .y = exact, .y_stride = s.n_out, .group_offsets = offsets,
                              .group_order = order, .n_rows_x = n_tokens};
  ASSERT_TRUE(vk::matmul_id_exact(*dev, args).is_ok());
  const auto want = s.down(exact, n);
  std::vector<bool> int_dots = {false};
  if (dev->info().integer_dot) int_dots.push_back(true);
  for (const bool int_dot : int_dots) {
    auto fast = s.zeros(n);
    auto fast_args = args;
    fast_args.y = fast;
    ASSERT_TRUE(vk::matmat_id(*dev, fast_args, int_dot).is_ok());
    expect_matches_exact(s.type, s.down(fast, n), want);
  }
  // The grouping itself: offsets are the prefix sums of the counts; every pair appears once.
  std::vector<uint32_t> got_offsets(static_cast<size_t>(n_mat + 1)), got_order(static_cast<size_t>(n_pairs));
  ASSERT_TRUE(dev->download(offsets, got_offsets.data(), got_offsets.size() * 4).is_ok());
  ASSERT_TRUE(dev->download(order, got_order.data(), got_order.size() * 4).is_ok());
  EXPECT_EQ(got_offsets.back(), static_cast<uint32_t>(n_pairs));
  for (int64_t e = 0; e < n_mat; ++e) {
    for (uint32_t i = got_offsets[static_cast<size_t>(e)]; i < got_offsets[static_cast<size_t>(e + 1)]; ++i) {
      EXPECT_EQ(ids[got_order[i]], static_cast<uint32_t>(e));
    }
  }
  std::sort(got_order.begin(), got_order.end());
  for (int64_t z = 0; z < n_pairs; ++z) EXPECT_EQ(got_order[static_cast<size_t>(z)], static_cast<uint32_t>(z));
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, GpuMatvec,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_XS),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A mismatch in a SwiGLU pair's shapes is a clear error, not a bad dispatch.
TEST(GpuMatvecErrors, SwiGluNeedsMatchingShapes) {
  GPU_OR_SKIP(dev);
  MatvecCase a(*dev, DType::Q8_0, 256, 8, 1, 1, 70), b(*dev, DType::Q8_0, 256, 9, 1, 1, 71);
  auto y = a.zeros(16);
  const Status st = vk::matvec(*dev, {.w = &a.w, .xq = a.xq, .x_row_bytes = a.xq_stride, .n_tok = 1, .y = y,
                                      .y_stride = 8, .up = &b.w});
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("SwiGLU"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace moetier
#endif
