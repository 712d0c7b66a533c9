// AVX2 dot-product kernels (cpu/dot/*_avx2.cpp), called directly (best_dot_kernel may
// prefer AVX-512 kernels on this machine), against the scalar references:
//  - quantized families: bit-identical to the scalar kernel (each kernel's header argues
//    the exact integer sums and the reference's float expression per block);
//  - float families: within the bound derived in docs/numerics.md (below);
//  - multi-row variants: out[j] bit-identical to the single-row kernel on row j, for
//    n_act = 1..4 distinct rows at a stride larger than a row.
// Rows: random bytes (every code and scale pattern, finite fp16 scales), quantized random
// data, and extremes (max codes and scales, activations ±127, all zeros). Lengths include
// odd super-block counts and Q8_0 / Q4_0 block counts that are not multiples of 4 (the
// single-row kernels' unroll).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier::cpu {
namespace {

bool has_avx2() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx2 && cpu.fma && cpu.f16c;
}

struct Family {
  DType weight_type;
  VecDotFn single;
  MultiDotFn multi;
};

const Family kQuantFamilies[] = {
    {DType::Q4_K, dot::q4_k_q8_k_avx2, dot::q4_k_q8_k_avx2_multi},
    {DType::Q5_K, dot::q5_k_q8_k_avx2, dot::q5_k_q8_k_avx2_multi},
    {DType::Q6_K, dot::q6_k_q8_k_avx2, dot::q6_k_q8_k_avx2_multi},
    {DType::IQ4_XS, dot::iq4_xs_q8_k_avx2, dot::iq4_xs_q8_k_avx2_multi},
    {DType::Q8_0, dot::q8_0_q8_0_avx2, dot::q8_0_q8_0_avx2_multi},
    {DType::Q4_0, dot::q4_0_q8_0_avx2, dot::q4_0_q8_0_avx2_multi},
};

// The same integer kernels compiled with AVX-VNNI (VPDPWSSD / VPDPBUSD): also bit-identical.
const Family kVnniFamilies[] = {
    {DType::Q4_K, dot::q4_k_q8_k_avxvnni, dot::q4_k_q8_k_avxvnni_multi},
    {DType::Q5_K, dot::q5_k_q8_k_avxvnni, dot::q5_k_q8_k_avxvnni_multi},
    {DType::Q6_K, dot::q6_k_q8_k_avxvnni, dot::q6_k_q8_k_avxvnni_multi},
    {DType::IQ4_XS, dot::iq4_xs_q8_k_avxvnni, dot::iq4_xs_q8_k_avxvnni_multi},
    {DType::Q8_0, dot::q8_0_q8_0_avxvnni, dot::q8_0_q8_0_avxvnni_multi},
    {DType::Q4_0, dot::q4_0_q8_0_avxvnni, dot::q4_0_q8_0_avxvnni_multi},
};

bool has_avxvnni() { return has_avx2() && cpu_features().avxvnni; }

const Family kFloatFamilies[] = {
    {DType::F32, dot::f32_f32_avx2, dot::f32_f32_avx2_multi},
    {DType::F16, dot::f16_f16_avx2, dot::f16_f16_avx2_multi},
    {DType::BF16, dot::bf16_bf16_avx2, dot::bf16_bf16_avx2_multi},
};

DType act_type(DType wt) { return *activation_type_for(wt); }

size_t row_bytes(DType t, int64_t n) { return static_cast<size_t>(dtype_row_bytes(t, n)); }

std::vector<int64_t> lengths(DType wt) {
  switch (wt) {
    case DType::Q8_0:
    case DType::Q4_0:
      return {32, 96, 160, 256, 2048, 2080};  // 1, 3, 5, 8, 64, 65 blocks
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return {1, 7, 8, 31, 33, 100, 256, 2048, 4103};
    default:
      return {256, 768, 2048, 2816, 4352};  // 1, 3, 8, 11, 17 super-blocks
  }
}

// Writes a random finite half in ±[2^-6, 2^2) at p (the scale fields of weight blocks).
void put_scale(uint8_t* p, std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(-6.0f, 2.0f);
  const float v = std::exp2(mag(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
  const fp16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, sizeof(h));
}

// A weight row of random bytes (every code/scale bit pattern decodes), with its fp16 scale
// fields replaced by finite values.
std::vector<uint8_t> random_weight_row(DType wt, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(row_bytes(wt, n));
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  const int64_t blocks = n / dtype_traits(wt).block_elems;
  for (int64_t b = 0; b < blocks; ++b) {
    switch (wt) {
      case DType::Q4_K: {
        auto* x = reinterpret_cast<BlockQ4_K*>(row.data()) + b;
        put_scale(reinterpret_cast<uint8_t*>(&x->d), rng);
        put_scale(reinterpret_cast<uint8_t*>(&x->dmin), rng);
        break;
      }
      case DType::Q5_K: {
        auto* x = reinterpret_cast<BlockQ5_K*>(row.data()) + b;
        put_scale(reinterpret_cast<uint8_t*>(&x->d), rng);
        put_scale(reinterpret_cast<uint8_t*>(&x->dmin), rng);
        break;
      }
      case DType::Q6_K:
        put_scale(reinterpret_cast<uint8_t*>(&(reinterpret_cast<BlockQ6_K*>(row.data()) + b)->d), rng);
        break;
      case DType::IQ4_XS:
        put_scale(reinterpret_cast<uint8_t*>(&(reinterpret_cast<BlockIQ4_XS*>(row.data()) + b)->d), rng);
        break;
      case DType::Q8_0: {
        auto* x = reinterpret_cast<BlockQ8_0*>(row.data()) + b;
        put_scale(reinterpret_cast<uint8_t*>(&x->d), rng);
        break;
      }
      case DType::Q4_0:
        put_scale(reinterpret_cast<uint8_t*>(&(reinterpret_cast<BlockQ4_0*>(row.data()) + b)->d), rng);
        break;
      default:
        ADD_FAILURE() << "no random row for " << dtype_name(wt);
    }
  }
  return row;
}

// Weight row with the largest codes and scales: every block field set to all ones, except
// the fp16 scale(s) = `scale`. (Q6_K's int8 scales become −1, so also try 0x7F / 0x80.)
std::vector<uint8_t> saturated_weight_row(DType wt, int64_t n, uint8_t fill, std::mt19937& rng) {
  std::vector<uint8_t> row = random_weight_row(wt, n, rng);  // finite scales
  const int64_t blocks = n / dtype_traits(wt).block_elems;
  for (int64_t b = 0; b < blocks; ++b) {
    switch (wt) {
      case DType::Q4_K: {
        auto* x = reinterpret_cast<BlockQ4_K*>(row.data()) + b;
        std::memset(x->scales, fill, sizeof(x->scales));
        std::memset(x->qs, fill, sizeof(x->qs));
        break;
      }
      case DType::Q5_K: {
        auto* x = reinterpret_cast<BlockQ5_K*>(row.data()) + b;
        std::memset(x->scales, fill, sizeof(x->scales));
        std::memset(x->qh, fill, sizeof(x->qh));
        std::memset(x->qs, fill, sizeof(x->qs));
        break;
      }
      case DType::Q6_K: {
        auto* x = reinterpret_cast<BlockQ6_K*>(row.data()) + b;
        std::memset(x->ql, fill, sizeof(x->ql));
        std::memset(x->qh, fill, sizeof(x->qh));
        std::memset(x->scales, fill, sizeof(x->scales));
        break;
      }
      case DType::IQ4_XS: {
        auto* x = reinterpret_cast<BlockIQ4_XS*>(row.data()) + b;
        x->scales_h = static_cast<uint16_t>(fill * 0x0101);
        std::memset(x->scales_l, fill, sizeof(x->scales_l));
        std::memset(x->qs, fill, sizeof(x->qs));
        break;
      }
      case DType::Q8_0: {
        auto* x = reinterpret_cast<BlockQ8_0*>(row.data()) + b;
        std::memset(x->qs, fill, sizeof(x->qs));
        break;
      }
      case DType::Q4_0: {
        auto* x = reinterpret_cast<BlockQ4_0*>(row.data()) + b;
        std::memset(x->qs, fill, sizeof(x->qs));
        break;
      }
      default:
        break;
    }
  }
  return row;
}

// Activation row (Q8_K or Q8_0) from codes code(i) ∈ [−127, 127], with consistent bsums.
template <class Code>
std::vector<uint8_t> coded_activation_row(DType at, int64_t n, Code code, std::mt19937& rng) {
  std::vector<uint8_t> row(row_bytes(at, n));
  std::uniform_real_distribution<float> scale(0.001f, 0.1f);
  if (at == DType::Q8_K) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      auto* y = reinterpret_cast<BlockQ8_K*>(row.data()) + b;
      y->d = scale(rng);
      for (int i = 0; i < kQK_K; ++i) y->qs[i] = static_cast<int8_t>(code(b * kQK_K + i));
      for (int g = 0; g < kQK_K / 16; ++g) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += y->qs[16 * g + i];
        y->bsums[g] = static_cast<int16_t>(s);
      }
    }
  } else {
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      auto* y = reinterpret_cast<BlockQ8_0*>(row.data()) + b;
      y->d = f32_to_fp16(scale(rng));
      for (int i = 0; i < kQK8_0; ++i) y->qs[i] = static_cast<int8_t>(code(b * kQK8_0 + i));
    }
  }
  return row;
}

std::vector<uint8_t> quantized_row(DType t, int64_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = gauss(rng);
  std::vector<uint8_t> row(row_bytes(t, n));
  type_ops(t)->quantize_row(x.data(), row.data(), n);
  return row;
}

std::string bits(float f) { return fmt::format("{} (0x{:08x})", f, std::bit_cast<uint32_t>(f)); }

// Activation rows for a case: a list of whole rows of n elements.
std::vector<std::vector<uint8_t>> activation_cases(DType at, int64_t n, std::mt19937& rng) {
  std::vector<std::vector<uint8_t>> rows;
  std::uniform_int_distribution<int> any_code(-127, 127);
  rows.push_back(quantized_row(at, n, 1.0f, rng));
  rows.push_back(coded_activation_row(at, n, [&](int64_t) { return any_code(rng); }, rng));
  rows.push_back(coded_activation_row(at, n, [](int64_t) { return 127; }, rng));
  rows.push_back(coded_activation_row(at, n, [](int64_t) { return -127; }, rng));
  rows.push_back(coded_activation_row(at, n, [](int64_t i) { return i % 3 == 0 ? -127 : 127; }, rng));
  rows.push_back(coded_activation_row(at, n, [](int64_t) { return 0; }, rng));
  return rows;
}

std::vector<std::vector<uint8_t>> weight_cases(DType wt, int64_t n, std::mt19937& rng) {
  std::vector<std::vector<uint8_t>> rows;
  rows.push_back(random_weight_row(wt, n, rng));
  rows.push_back(quantized_row(wt, n, 0.05f, rng));
  rows.push_back(saturated_weight_row(wt, n, 0xFF, rng));
  rows.push_back(saturated_weight_row(wt, n, 0x7F, rng));
  rows.push_back(saturated_weight_row(wt, n, 0x80, rng));
  rows.push_back(saturated_weight_row(wt, n, 0x00, rng));
  return rows;
}

// Packs rows into one buffer, `stride` bytes apart.
std::vector<uint8_t> pack_rows(const std::vector<const std::vector<uint8_t>*>& rows, size_t stride) {
  std::vector<uint8_t> buf(stride * rows.size(), 0xCD);
  for (size_t j = 0; j < rows.size(); ++j) std::memcpy(buf.data() + j * stride, rows[j]->data(), rows[j]->size());
  return buf;
}

// multi(rows 0..n_act-1) must equal single(row j) bit for bit, for n_act = 1..4.
void expect_multi_matches_single(const Family& f, int64_t n, const std::vector<uint8_t>& w,
                                 const std::vector<std::vector<uint8_t>>& acts, const std::string& what) {
  const size_t stride = acts[0].size() + 96;  // not the row size: the kernel must use `stride`
  for (int n_act = 1; n_act <= kMaxDotRows; ++n_act) {
    for (size_t first = 0; first < acts.size(); ++first) {
      std::vector<const std::vector<uint8_t>*> rows;
      for (int j = 0; j < n_act; ++j) rows.push_back(&acts[(first + static_cast<size_t>(j)) % acts.size()]);
      const std::vector<uint8_t> buf = pack_rows(rows, stride);
      float out[kMaxDotRows + 1];
      out[n_act] = 12345.0f;  // must stay untouched
      f.multi(n, w.data(), buf.data(), static_cast<int64_t>(stride), n_act, out);
      EXPECT_EQ(out[n_act], 12345.0f) << dtype_name(f.weight_type) << " wrote past out[n_act-1]";
      for (int j = 0; j < n_act; ++j) {
        const float single = f.single(n, w.data(), rows[static_cast<size_t>(j)]->data());
        EXPECT_EQ(std::bit_cast<uint32_t>(out[j]), std::bit_cast<uint32_t>(single))
            << dtype_name(f.weight_type) << " n=" << n << " n_act=" << n_act << " row " << j << " " << what
            << ": multi " << bits(out[j]) << " single " << bits(single);
      }
    }
  }
}

TEST(DotKernelsAvx2ExtTable, EveryFamilyHasSingleAndMultiKernels) {
  const DType types[] = {DType::F32, DType::F16,  DType::BF16, DType::Q4_0,  DType::Q8_0,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  for (DType t : types) {
    const DotKernel* found = nullptr;
    for (const DotKernel& k : dot_kernels(IsaTier::kAvx2)) {
      if (k.weight_type == t) found = &k;
    }
    ASSERT_NE(found, nullptr) << dtype_name(t);
    EXPECT_EQ(found->activation_type, act_type(t)) << dtype_name(t);
    EXPECT_EQ(found->tier, IsaTier::kAvx2);
    EXPECT_NE(found->multi, nullptr) << dtype_name(t);
  }
  for (const Family* list : {kQuantFamilies, kFloatFamilies}) {
    const size_t count = list == kQuantFamilies ? std::size(kQuantFamilies) : std::size(kFloatFamilies);
    for (size_t i = 0; i < count; ++i) {
      bool listed = false;
      for (const DotKernel& k : dot_kernels(IsaTier::kAvx2)) {
        listed |= k.weight_type == list[i].weight_type && k.fn == list[i].single && k.multi == list[i].multi;
      }
      EXPECT_TRUE(listed) << dtype_name(list[i].weight_type);
    }
  }
}

TEST(DotKernelsAvx2ExtQuant, SingleRowBitIdenticalToScalar) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C";
  std::mt19937 rng(2026);
  for (const Family& f : kQuantFamilies) {
    const DotKernel* scalar = scalar_dot_kernel(f.weight_type);
    for (int64_t n : lengths(f.weight_type)) {
      const auto ws = weight_cases(f.weight_type, n, rng);
      const auto as = activation_cases(act_type(f.weight_type), n, rng);
      for (size_t wi = 0; wi < ws.size(); ++wi) {
        for (size_t ai = 0; ai < as.size(); ++ai) {
          const float ref = scalar->fn(n, ws[wi].data(), as[ai].data());
          const float got = f.single(n, ws[wi].data(), as[ai].data());
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
              << dtype_name(f.weight_type) << " n=" << n << " weights#" << wi << " acts#" << ai << ": avx2 "
              << bits(got) << " scalar " << bits(ref);
        }
      }
    }
  }
}

TEST(DotKernelsAvx2ExtQuant, MultiRowBitIdenticalToSingleRow) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C";
  std::mt19937 rng(77);
  for (const Family& f : kQuantFamilies) {
    for (int64_t n : lengths(f.weight_type)) {
      const auto ws = weight_cases(f.weight_type, n, rng);
      const auto as = activation_cases(act_type(f.weight_type), n, rng);
      for (size_t wi = 0; wi < ws.size(); ++wi) {
        expect_multi_matches_single(f, n, ws[wi], as, "weights#" + std::to_string(wi));
      }
    }
  }
}

TEST(DotKernelsAvxVnni, BitIdenticalToScalarAndMultiRowToSingleRow) {
  if (!has_avxvnni()) GTEST_SKIP() << "CPU lacks AVX-VNNI";
  std::mt19937 rng(4242);
  for (const Family& f : kVnniFamilies) {
    const DotKernel* scalar = scalar_dot_kernel(f.weight_type);
    for (int64_t n : lengths(f.weight_type)) {
      const auto ws = weight_cases(f.weight_type, n, rng);
      const auto as = activation_cases(act_type(f.weight_type), n, rng);
      for (size_t wi = 0; wi < ws.size(); ++wi) {
        for (size_t ai = 0; ai < as.size(); ++ai) {
          const float ref = scalar->fn(n, ws[wi].data(), as[ai].data());
          const float got = f.single(n, ws[wi].data(), as[ai].data());
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
              << dtype_name(f.weight_type) << " n=" << n << " weights#" << wi << " acts#" << ai << ": avxvnni "
              << bits(got) << " scalar " << bits(ref);
        }
        expect_multi_matches_single(f, n, ws[wi], as, "avxvnni weights#" + std::to_string(wi));
      }
    }
  }
  // The table lists them, and picks them for the AVX2 tier on a VNNI CPU.
  for (const Family& f : kVnniFamilies) {
    bool listed = false;
    for (const DotKernel& k : dot_kernels(IsaTier::kAvxVnni)) listed |= k.weight_type == f.weight_type && k.fn == f.single && k.multi == f.multi && k.tier == IsaTier::kAvxVnni;
    EXPECT_TRUE(listed) << dtype_name(f.weight_type);
    CpuFeatures avx2_tier = cpu_features();
    avx2_tier.avx512f = avx2_tier.avx512bw = avx2_tier.avx512vl = avx2_tier.avx512vnni = false;
    EXPECT_EQ(best_dot_kernel(f.weight_type, avx2_tier)->fn, f.single) << dtype_name(f.weight_type);
    avx2_tier.avxvnni = false;
    EXPECT_EQ(best_dot_kernel(f.weight_type, avx2_tier)->tier, IsaTier::kAvx2) << dtype_name(f.weight_type);
  }
}

// The Q8_0 tile kernels (TileDotFn, q8_0_tile_impl.h): every (row, token) of a tile of
// 1..8 weight rows (the 6 weight cases, and rows at a stride that is not the row size)
// against 1..13 activation rows (every remainder of the 4-token groups) is bit-identical to
// the scalar reference; nothing is written outside the n_rows × n_act outputs.
void expect_tile_matches_scalar(DType wt, TileDotFn tile, const char* isa) {
  std::mt19937 rng(9090);
  const DotKernel* scalar = scalar_dot_kernel(wt);
  const DType at = act_type(wt);
  for (int64_t n : lengths(wt)) {
    const auto ws = weight_cases(wt, n, rng);
    const auto as = activation_cases(at, n, rng);
    const size_t w_stride = ws[0].size() + 34, a_stride = as[0].size() + 96;
    for (int n_rows = 1; n_rows <= kTileRows; ++n_rows) {
      for (int n_act : {1, 2, 3, 4, 5, 7, 8, 13}) {
        std::vector<const std::vector<uint8_t>*> wrows, arows;
        for (int i = 0; i < n_rows; ++i) wrows.push_back(&ws[static_cast<size_t>(i + n_act) % ws.size()]);
        for (int j = 0; j < n_act; ++j) arows.push_back(&as[static_cast<size_t>(j + n_rows) % as.size()]);
        const std::vector<uint8_t> wbuf = pack_rows(wrows, w_stride), abuf = pack_rows(arows, a_stride);
        const int64_t n_blocks = n / kQK8_0;
        std::vector<Q8_0ActBlock> blocks;
        if (at == DType::Q8_0) {
          blocks.resize(static_cast<size_t>(n_act * n_blocks));
          for (int j = 0; j < n_act; ++j) dot::q8_0_act_blocks(n, arows[static_cast<size_t>(j)]->data(), blocks.data() + j * n_blocks);
        }
        const int64_t out_stride = kTileRows + 3;
        std::vector<float> out(static_cast<size_t>(n_act * out_stride), 12345.0f);
        tile({.n = n, .weight_rows = wbuf.data(), .weight_stride = static_cast<int64_t>(w_stride), .n_rows = n_rows,
              .activation_rows = abuf.data(), .activation_stride = static_cast<int64_t>(a_stride), .n_act = n_act,
              .act_blocks = blocks.empty() ? nullptr : blocks.data(), .out = out.data(), .out_stride = out_stride});
        for (int j = 0; j < n_act; ++j) {
          for (int64_t i = 0; i < out_stride; ++i) {
            const float got = out[static_cast<size_t>(j * out_stride + i)];
            if (i >= n_rows) {
              EXPECT_EQ(got, 12345.0f) << isa << " wrote past row " << n_rows - 1 << " of token " << j;
              continue;
            }
            const float ref = scalar->fn(n, wrows[static_cast<size_t>(i)]->data(), arows[static_cast<size_t>(j)]->data());
            EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
                << isa << " " << dtype_name(wt) << " n=" << n << " rows=" << n_rows << " acts=" << n_act << " (" << i << ", " << j << "): tile "
                << bits(got) << " scalar " << bits(ref);
          }
        }
      }
    }
  }
}

// The tile kernels on interleaved groups (DotKernel::tile_x8, cpu/interleave.h): 8 rows
// drawn from the weight cases (each case in every row position across the n_act loop),
// interleaved, against 1..13 activation rows and 67 (from 64 tokens on the VNNI kernels decode
// the whole group first, kquant_tile_driver.h's kDecodeAllTokens): every (row, token)
// bit-identical to the scalar reference on the rows before interleaving, and nothing
// written past the 8 outputs.
void expect_tile_x8_matches_scalar(DType wt, TileDotFn tile_x8, const char* isa) {
  std::mt19937 rng(4242);
  const DotKernel* scalar = scalar_dot_kernel(wt);
  const DType at = act_type(wt);
  for (int64_t n : lengths(wt)) {
    const auto ws = weight_cases(wt, n, rng);
    const auto as = activation_cases(at, n, rng);
    const size_t rb = ws[0].size(), a_stride = as[0].size() + 96;
    for (int n_act : {1, 2, 3, 4, 5, 7, 8, 13, 67}) {
      std::vector<const std::vector<uint8_t>*> wrows, arows;
      for (int i = 0; i < kTileRows; ++i) wrows.push_back(&ws[static_cast<size_t>(i + n_act) % ws.size()]);
      for (int j = 0; j < n_act; ++j) arows.push_back(&as[static_cast<size_t>(j + 1) % as.size()]);
      const std::vector<uint8_t> rows = pack_rows(wrows, rb), abuf = pack_rows(arows, a_stride);
      std::vector<uint8_t> group(rows.size());
      interleave_group(wt, n, rows.data(), group.data());
      std::vector<Q8_0ActBlock> blocks;  // Q8_0 activations' terms, as matmul passes them
      if (at == DType::Q8_0) {
        const int64_t n_blocks = n / kQK8_0;
        blocks.resize(static_cast<size_t>(n_act * n_blocks));
        for (int j = 0; j < n_act; ++j) dot::q8_0_act_blocks(n, arows[static_cast<size_t>(j)]->data(), blocks.data() + j * n_blocks);
      }
      const int64_t out_stride = kTileRows + 3;
      std::vector<float> out(static_cast<size_t>(n_act * out_stride), 12345.0f);
      tile_x8({.n = n, .weight_rows = group.data(), .n_rows = kTileRows, .activation_rows = abuf.data(),
               .activation_stride = static_cast<int64_t>(a_stride), .n_act = n_act,
               .act_blocks = blocks.empty() ? nullptr : blocks.data(), .out = out.data(), .out_stride = out_stride});
      for (int j = 0; j < n_act; ++j) {
        for (int64_t i = 0; i < out_stride; ++i) {
          const float got = out[static_cast<size_t>(j * out_stride + i)];
          if (i >= kTileRows) {
            EXPECT_EQ(got, 12345.0f) << isa << " wrote past the group's rows, token " << j;
            continue;
          }
          const float ref = scalar->fn(n, wrows[static_cast<size_t>(i)]->data(), arows[static_cast<size_t>(j)]->data());
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
              << isa << " " << dtype_name(wt) << " n=" << n << " acts=" << n_act << " (" << i << ", " << j
              << "): tile_x8 " << bits(got) << " scalar " << bits(ref);
        }
      }
    }
  }
}

// Every family's tile kernels per ISA, as the ISA's table lists them (tile_x8: the
// interleaved form; on AVX-512 the K-quants' one-token case is x8_one_token_512).
// Plain AVX2 emulates VPDPBUSD with VPMADDUBSW, exact for the K-quants' codes and, with the
// sign moved to the activation, for Q8_0's and IQ4_XS's signed grid values
// (kquant_tile_avx2.cpp, q8_0_tile_impl.h, iq4_xs_tile_avx2.cpp).
struct TileFamily {
  DType weight_type;
  TileDotFn avx2, avxvnni, avx512, avx2_x8, avxvnni_x8, avx512_x8;
};
const TileFamily kTileFamilies[] = {
    {DType::Q8_0, dot::q8_0_q8_0_avx2_tile, dot::q8_0_q8_0_avxvnni_tile, dot::q8_0_q8_0_avx512_tile,
     dot::q8_0_q8_0_avx2_tile_x8, dot::q8_0_q8_0_avxvnni_tile_x8, dot::q8_0_q8_0_avx512_tile_x8},
    {DType::Q4_K, dot::q4_k_q8_k_avx2_tile, dot::q4_k_q8_k_avxvnni_tile, dot::q4_k_q8_k_avx512_tile,
     dot::q4_k_q8_k_avx2_tile_x8, dot::q4_k_q8_k_avxvnni_tile_x8, dot::q4_k_q8_k_avx512_tile_x8},
    {DType::Q5_K, dot::q5_k_q8_k_avx2_tile, dot::q5_k_q8_k_avxvnni_tile, dot::q5_k_q8_k_avx512_tile,
     dot::q5_k_q8_k_avx2_tile_x8, dot::q5_k_q8_k_avxvnni_tile_x8, dot::q5_k_q8_k_avx512_tile_x8},
    {DType::Q6_K, dot::q6_k_q8_k_avx2_tile, dot::q6_k_q8_k_avxvnni_tile, dot::q6_k_q8_k_avx512_tile,
     dot::q6_k_q8_k_avx2_tile_x8, dot::q6_k_q8_k_avxvnni_tile_x8, dot::q6_k_q8_k_avx512_tile_x8},
    {DType::IQ4_XS, dot::iq4_xs_q8_k_avx2_tile, dot::iq4_xs_q8_k_avxvnni_tile, dot::iq4_xs_q8_k_avx512_tile,
     dot::iq4_xs_q8_k_avx2_tile_x8,
     dot::iq4_xs_q8_k_avxvnni_tile_x8, dot::iq4_xs_q8_k_avx512_tile_x8},
};

// The ISA table's entry for the family holds exactly these kernels, and each present one is
// bit-identical to the scalar reference.
void expect_isa_tiles(std::span<const DotKernel> table, DType wt, TileDotFn tile, TileDotFn tile_x8, const char* isa) {
  const DotKernel* k = nullptr;
  for (const DotKernel& e : table) k = e.weight_type == wt ? &e : k;
  ASSERT_NE(k, nullptr) << isa << " " << dtype_name(wt);
  EXPECT_EQ(k->tile, tile) << isa << " " << dtype_name(wt);
  EXPECT_EQ(k->tile_x8, tile_x8) << isa << " " << dtype_name(wt);
  if (tile != nullptr) expect_tile_matches_scalar(wt, tile, isa);
  if (tile_x8 != nullptr) expect_tile_x8_matches_scalar(wt, tile_x8, isa);
}

TEST(DotKernelsTile, Avx2BitIdenticalToScalar) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "CPU lacks AVX2 + FMA + F16C";
  for (const TileFamily& f : kTileFamilies) expect_isa_tiles(dot_kernels(IsaTier::kAvx2), f.weight_type, f.avx2, f.avx2_x8, "avx2");
}

TEST(DotKernelsTile, AvxVnniBitIdenticalToScalar) {
  if (!has_avxvnni()) GTEST_SKIP() << "CPU lacks AVX-VNNI";
  for (const TileFamily& f : kTileFamilies) expect_isa_tiles(dot_kernels(IsaTier::kAvxVnni), f.weight_type, f.avxvnni, f.avxvnni_x8, "avxvnni");
}

TEST(DotKernelsTile, Avx512BitIdenticalToScalar) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "CPU lacks the AVX-512 set";
  for (const TileFamily& f : kTileFamilies) expect_isa_tiles(dot_kernels(IsaTier::kAvx512), f.weight_type, f.avx512, f.avx512_x8, "avx512");
}

// Only the kernels that exist are offered: no interleaved layout without a kernel for it.
TEST(DotKernelsTile, OnlyInterleavableTypesHaveTheX8Kernel) {
  for (auto table : {dot_kernels(IsaTier::kAvx2), dot_kernels(IsaTier::kAvxVnni), dot_kernels(IsaTier::kAvx512)}) {
    for (const DotKernel& k : table) {
      if (k.tile_x8 != nullptr) {
        EXPECT_TRUE(interleavable(k.weight_type)) << dtype_name(k.weight_type);
      }
    }
  }
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F32, DType::F16}) {
    EXPECT_EQ(scalar_dot_kernel(t)->tile_x8, nullptr);
  }
}

// The layout is a permutation of the group's bytes: interleave then deinterleave is the
// identity, every byte moves (random rows), and the group's first word holds row i's first
// 4 bytes in lane i (Q8_0: after the 8 rows' scales).
TEST(Interleave, GroupRoundTripsAndPutsRowsInLanes) {
  std::mt19937 rng(77);
  for (DType wt : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    for (int64_t n : {256, 768, 2048}) {
      const size_t rb = row_bytes(wt, n);
      std::vector<uint8_t> rows(rb * kInterleaveRows), group(rows.size()), back(rows.size());
      for (auto& b : rows) b = static_cast<uint8_t>(rng());
      interleave_group(wt, n, rows.data(), group.data());
      deinterleave_group(wt, n, group.data(), back.data());
      EXPECT_EQ(back, rows) << dtype_name(wt) << " n=" << n;
      std::vector<uint8_t> sorted_rows = rows, sorted_group = group;
      std::sort(sorted_rows.begin(), sorted_rows.end());
      std::sort(sorted_group.begin(), sorted_group.end());
      EXPECT_EQ(sorted_rows, sorted_group) << "not a permutation";
      // Q8_0: the 8 scales (2 bytes each) come first, then the words of the codes.
      const size_t head = wt == DType::Q8_0 ? 2 : 0;
      for (int i = 0; i < kInterleaveRows; ++i) {
        EXPECT_EQ(std::memcmp(group.data() + head * i, rows.data() + i * rb, head), 0) << dtype_name(wt) << " row " << i;
        EXPECT_EQ(std::memcmp(group.data() + head * kInterleaveRows + 4 * i, rows.data() + i * rb + head, 4), 0)
            << dtype_name(wt) << " row " << i;
      }
      // In place over a stack of 3 groups on 2 threads: each group as interleave_group gives.
      std::vector<uint8_t> stack(rb * 3 * kInterleaveRows);
      for (auto& b : stack) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> expect(stack.size());
      for (int g = 0; g < 3; ++g) {
        interleave_group(wt, n, stack.data() + g * rb * kInterleaveRows, expect.data() + g * rb * kInterleaveRows);
      }
      interleave_in_place(wt, n, 3 * kInterleaveRows, stack.data(), 2);
      EXPECT_EQ(stack, expect) << dtype_name(wt);
    }
  }
}

TEST(DotKernelsTile, ActivationBlockTerms) {
  std::mt19937 rng(5);
  const auto as = activation_cases(DType::Q8_0, 96, rng);
  for (const auto& a : as) {
    Q8_0ActBlock blocks[3];
    dot::q8_0_act_blocks(96, a.data(), blocks);
    const auto* y = reinterpret_cast<const BlockQ8_0*>(a.data());
    for (int b = 0; b < 3; ++b) {
      int sum = 0;
      for (int j = 0; j < kQK8_0; ++j) sum += y[b].qs[j];
      EXPECT_EQ(blocks[b].offset, -128 * sum);
      EXPECT_EQ(blocks[b].d, fp16_to_f32(y[b].d));
    }
  }
}

// Float families (docs/numerics.md, "Dot products"): every product enters exactly and takes
// part in at most m = ⌊n/32⌋ + 15 rounded float additions, so |simd − exact| ≤ γ_m·S with
// S = Σ|w_i·a_i| and γ_m = m·u/(1 − m·u), u = 2^-24. The scalar reference sums the exact
// products in double (error ≤ γ'_n·S, γ'_n = n·2^-53/(1 − n·2^-53)) and rounds once to
// float (≤ u·|result| ≤ u·(1 + γ'_n)·S). Hence
//   |simd − ref| ≤ (γ_m + u·(1 + γ'_n) + γ'_n)·S,
// i.e. c·n·u·S with c ≈ 1/32 + 16/n (≤ 0.6 for n ≥ 32; for tiny n the constant term rules).
double float_bound(int64_t n, double abs_sum) {
  const double u = std::ldexp(1.0, -24);
  const double m = static_cast<double>(n / 32 + 15);
  const double gamma_m = m * u / (1.0 - m * u);
  const double ud = std::ldexp(1.0, -53);
  const double gamma_n = static_cast<double>(n) * ud / (1.0 - static_cast<double>(n) * ud);
  return (gamma_m + u * (1.0 + gamma_n) + gamma_n) * abs_sum;
}

std::vector<uint8_t> float_row(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> row(row_bytes(t, static_cast<int64_t>(x.size())));
  type_ops(t)->quantize_row(x.data(), row.data(), static_cast<int64_t>(x.size()));
  return row;
}

std::vector<std::vector<uint8_t>> float_cases(DType t, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-8.0f, 8.0f);
  std::vector<std::vector<uint8_t>> rows;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = gauss(rng);
  rows.push_back(float_row(t, x));
  for (auto& v : x) v = gauss(rng) * std::exp2(expo(rng));  // wide dynamic range
  rows.push_back(float_row(t, x));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2) ? -1000.0f : 1000.0f;  // cancellation
  rows.push_back(float_row(t, x));
  std::fill(x.begin(), x.end(), 0.0f);
  rows.push_back(float_row(t, x));
  return rows;
}

TEST(DotKernelsAvx2ExtFloat, SingleRowWithinDerivedBoundOfScalar) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C";
  std::mt19937 rng(5);
  for (const Family& f : kFloatFamilies) {
    const DotKernel* scalar = scalar_dot_kernel(f.weight_type);
    for (int64_t n : lengths(f.weight_type)) {
      const auto ws = float_cases(f.weight_type, n, rng);
      const auto as = float_cases(f.weight_type, n, rng);
      for (size_t wi = 0; wi < ws.size(); ++wi) {
        for (size_t ai = 0; ai < as.size(); ++ai) {
          std::vector<float> wv(static_cast<size_t>(n)), av(static_cast<size_t>(n));
          type_ops(f.weight_type)->dequantize_row(ws[wi].data(), wv.data(), n);
          type_ops(f.weight_type)->dequantize_row(as[ai].data(), av.data(), n);
          double abs_sum = 0;
          for (size_t i = 0; i < wv.size(); ++i) abs_sum += std::fabs(double{wv[i]} * av[i]);
          const float ref = scalar->fn(n, ws[wi].data(), as[ai].data());
          const float got = f.single(n, ws[wi].data(), as[ai].data());
          EXPECT_LE(std::fabs(double{got} - ref), float_bound(n, abs_sum))
              << dtype_name(f.weight_type) << " n=" << n << " weights#" << wi << " acts#" << ai << " avx2=" << got
              << " scalar=" << ref << " S=" << abs_sum;
          if (abs_sum == 0) {
            EXPECT_EQ(got, 0.0f);
          }
        }
      }
    }
  }
}

TEST(DotKernelsAvx2ExtFloat, MultiRowBitIdenticalToSingleRow) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C";
  std::mt19937 rng(9);
  for (const Family& f : kFloatFamilies) {
    for (int64_t n : lengths(f.weight_type)) {
      const auto ws = float_cases(f.weight_type, n, rng);
      const auto as = float_cases(f.weight_type, n, rng);
      for (size_t wi = 0; wi < ws.size(); ++wi) {
        expect_multi_matches_single(f, n, ws[wi], as, "weights#" + std::to_string(wi));
      }
    }
  }
}

TEST(DotKernelsAvx2ExtRows, DotRowsUsesTheMultiKernel) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C";
  std::mt19937 rng(3);
  for (const DotKernel& k : dot_kernels(IsaTier::kAvx2)) {
    const int64_t n = 512;
    const auto w = k.weight_type == DType::F32 || k.weight_type == DType::F16 || k.weight_type == DType::BF16
                       ? float_cases(k.weight_type, n, rng)[0]
                       : random_weight_row(k.weight_type, n, rng);
    const auto a = k.activation_type == DType::Q8_K || k.activation_type == DType::Q8_0
                       ? activation_cases(k.activation_type, n, rng)
                       : float_cases(k.activation_type, n, rng);
    const std::vector<const std::vector<uint8_t>*> rows = {&a[0], &a[1], &a[2]};
    const std::vector<uint8_t> buf = pack_rows(rows, a[0].size());
    float out[3];
    dot_rows(k, n, w.data(), buf.data(), static_cast<int64_t>(a[0].size()), 3, out);
    for (int j = 0; j < 3; ++j) {
      const float single = k.fn(n, w.data(), a[static_cast<size_t>(j)].data());
      EXPECT_EQ(std::bit_cast<uint32_t>(out[j]), std::bit_cast<uint32_t>(single)) << dtype_name(k.weight_type) << " row " << j;
    }
  }
}

}  // namespace
}  // namespace moetier::cpu
