// AVX-512 (F, BW, VL, VNNI) dot-product kernels against their scalar references.
//
// Quantized families: every kernel forms the scalar's exact int32 sum per block (ranges
// argued in each kernel's header) and then the scalar's float expression per block, in
// block order, without FMA contraction, so single-row results must be bit-identical to the
// scalar ones. Multi-row kernels must give, for every row j, bit-identically the single-row
// result on row j (results must not depend on how a matmul tiles its tokens).
//
// Float families accumulate in double lanes; the bound they must meet is derived below
// (FloatBound) from their documented order of operations, not tuned.
#include <gtest/gtest.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "cpu/dot.h"
#include "cpu/matmul.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier::cpu {
namespace {

bool has_avx512_set(const CpuFeatures& c) {
  return c.avx2 && c.fma && c.f16c && c.avx512f && c.avx512bw && c.avx512vl && c.avx512vnni;
}

struct Case {
  DType weight_type;
  VecDotFn single;
  MultiDotFn multi;
};

constexpr Case kIntegerCases[] = {
    {DType::Q4_K, dot::q4_k_q8_k_avx512, dot::q4_k_q8_k_avx512_multi},
    {DType::Q5_K, dot::q5_k_q8_k_avx512, dot::q5_k_q8_k_avx512_multi},
    {DType::Q6_K, dot::q6_k_q8_k_avx512, dot::q6_k_q8_k_avx512_multi},
    {DType::IQ4_XS, dot::iq4_xs_q8_k_avx512, dot::iq4_xs_q8_k_avx512_multi},
    {DType::Q8_0, dot::q8_0_q8_0_avx512, dot::q8_0_q8_0_avx512_multi},
    {DType::Q4_0, dot::q4_0_q8_0_avx512, dot::q4_0_q8_0_avx512_multi},
};

constexpr Case kFloatCases[] = {
    {DType::F32, dot::f32_f32_avx512, dot::f32_f32_avx512_multi},
    {DType::F16, dot::f16_f16_avx512, dot::f16_f16_avx512_multi},
    {DType::BF16, dot::bf16_bf16_avx512, dot::bf16_bf16_avx512_multi},
};

DType act_type(DType wt) { return scalar_dot_kernel(wt)->activation_type; }

std::vector<uint8_t> quantize_weights(DType wt, const std::vector<float>& x) {
  std::vector<uint8_t> out(static_cast<size_t>(dtype_row_bytes(wt, static_cast<int64_t>(x.size()))));
  type_ops(wt)->quantize_row(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<uint8_t> quantize_acts(DType at, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  QuantizedActivations q;
  ThreadPool pool(1);
  quantize_activations(at, x.data(), 1, n, q, pool);
  return std::vector<uint8_t>(q.bytes.begin(), q.bytes.begin() + dtype_row_bytes(at, n));
}

// Random bytes as a weight row: every code and sub-block scale pattern occurs (largest
// scales and mins included); only the fp16 super-block scales are replaced by finite ones.
std::vector<uint8_t> random_weight_bytes(DType wt, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> w(static_cast<size_t>(dtype_row_bytes(wt, n)));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
  const int64_t block_bytes = static_cast<int64_t>(dtype_traits(wt).block_bytes);
  const int64_t n_blocks = static_cast<int64_t>(w.size()) / block_bytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = w.data() + b * block_bytes;
    auto put = [&](size_t offset) {
      const fp16_t h = f32_to_fp16(scale(rng));
      std::memcpy(blk + offset, &h, sizeof(h));
    };
    switch (wt) {
      case DType::Q4_K:
      case DType::Q5_K: put(0); put(2); break;
      case DType::Q6_K: put(offsetof(BlockQ6_K, d)); break;
      default: put(0); break;  // Q8_0, Q4_0, IQ4_XS: d first
    }
  }
  return w;
}

// A Q8_K row whose every code is `code` (−128 allowed: Q8_K's format is the full int8
// range even though our quantizer stays in [−127, 127]), with consistent bsums.
std::vector<uint8_t> constant_q8k_row(int64_t n, int8_t code) {
  std::vector<BlockQ8_K> blocks(static_cast<size_t>(n / kQK_K));
  for (auto& b : blocks) {
    b.d = 0.5f;
    for (auto& q : b.qs) q = code;
    for (auto& s : b.bsums) s = static_cast<int16_t>(16 * code);
  }
  std::vector<uint8_t> out(blocks.size() * sizeof(BlockQ8_K));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Four distinct activation rows, `stride` bytes apart (stride > row bytes, to catch a
// kernel that assumes dense rows).
struct ActRows {
  std::vector<uint8_t> bytes;
  int64_t stride = 0;
  const uint8_t* row(int j) const { return bytes.data() + j * stride; }
};

ActRows pack_rows(const std::vector<std::vector<uint8_t>>& rows) {
  ActRows r;
  r.stride = static_cast<int64_t>(rows[0].size()) + 16;
  r.bytes.assign(static_cast<size_t>(r.stride * kMaxDotRows), 0xCD);
  for (int j = 0; j < kMaxDotRows; ++j) {
    std::copy(rows[j % rows.size()].begin(), rows[j % rows.size()].end(), r.bytes.begin() + j * r.stride);
  }
  return r;
}

// Multi-row results for n_act = 1..4 must equal the single-row kernel bit for bit.
void expect_multi_matches_single(const Case& c, const std::vector<uint8_t>& w, const ActRows& acts, int64_t n,
                                 const std::string& what) {
  for (int n_act = 1; n_act <= kMaxDotRows; ++n_act) {
    float out[kMaxDotRows] = {};
    c.multi(n, w.data(), acts.bytes.data(), acts.stride, n_act, out);
    for (int j = 0; j < n_act; ++j) {
      const float single = c.single(n, w.data(), acts.row(j));
      EXPECT_EQ(bits(out[j]), bits(single)) << dtype_name(c.weight_type) << " n=" << n << " " << what
                                            << " n_act=" << n_act << " row " << j << ": multi=" << out[j]
                                            << " single=" << single;
    }
  }
}

void expect_single_matches_scalar(const Case& c, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a,
                                  int64_t n, const std::string& what) {
  const float ref = scalar_dot_kernel(c.weight_type)->fn(n, w.data(), a.data());
  const float got = c.single(n, w.data(), a.data());
  EXPECT_EQ(bits(got), bits(ref)) << dtype_name(c.weight_type) << " n=" << n << " " << what << ": avx512=" << got
                                  << " scalar=" << ref;
}

std::vector<int64_t> integer_shapes(DType wt) {
  // K families: 1, 2, 3, 5, 11 (odd), 16 super-blocks: the single-row kernel works in steps
  // of 4 blocks, so 3, 5 and 11 run its tail. Q8_0 / Q4_0: 1, 3, 7, 9, 65, 128 blocks (the
  // single-row step is 8 blocks, the multi-row step 2).
  if (wt == DType::Q8_0 || wt == DType::Q4_0) return {32, 96, 224, 288, 2080, 4096};
  return {256, 512, 768, 1280, 2816, 4096};
}

TEST(DotKernelsAvx512, BestKernelIsAvx512OnThisCpu) {
  const CpuFeatures& cpu = cpu_features();
  if (!has_avx512_set(cpu)) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  for (const Case& c : kIntegerCases) {
    const DotKernel* k = best_dot_kernel(c.weight_type, cpu);
    EXPECT_EQ(k->fn, c.single) << dtype_name(c.weight_type);
    EXPECT_EQ(k->multi, c.multi) << dtype_name(c.weight_type);
    EXPECT_EQ(k->activation_type, act_type(c.weight_type));
  }
  for (const Case& c : kFloatCases) {
    const DotKernel* k = best_dot_kernel(c.weight_type, cpu);
    EXPECT_EQ(k->fn, c.single) << dtype_name(c.weight_type);
    EXPECT_EQ(k->multi, c.multi) << dtype_name(c.weight_type);
  }
}

TEST(DotKernelsAvx512, IntegerFamiliesBitIdenticalOnRandomRows) {
  if (!has_avx512_set(cpu_features())) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (const Case& c : kIntegerCases) {
    const DType at = act_type(c.weight_type);
    for (int64_t n : integer_shapes(c.weight_type)) {
      std::vector<float> wf(static_cast<size_t>(n));
      for (auto& v : wf) v = gauss(rng) * 0.05f;
      const std::vector<std::vector<uint8_t>> weights = {quantize_weights(c.weight_type, wf),
                                                         random_weight_bytes(c.weight_type, n, rng)};
      std::vector<std::vector<uint8_t>> acts;
      for (int j = 0; j < kMaxDotRows; ++j) {
        std::vector<float> af(static_cast<size_t>(n));
        for (auto& v : af) v = gauss(rng) * (j % 2 ? 3.0f : 0.5f);
        acts.push_back(quantize_acts(at, af));
      }
      const ActRows rows = pack_rows(acts);
      for (size_t wi = 0; wi < weights.size(); ++wi) {
        const std::string what = wi == 0 ? "quantized weights" : "random weight bytes";
        for (const auto& a : acts) expect_single_matches_scalar(c, weights[wi], a, n, what);
        expect_multi_matches_single(c, weights[wi], rows, n, what);
      }
    }
  }
}

TEST(DotKernelsAvx512, IntegerFamiliesBitIdenticalOnExtremeRows) {
  if (!has_avx512_set(cpu_features())) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  std::mt19937 rng(5);
  for (const Case& c : kIntegerCases) {
    const DType at = act_type(c.weight_type);
    for (int64_t n : integer_shapes(c.weight_type)) {
      const size_t un = static_cast<size_t>(n);
      // Weights: quantized ±max inputs (largest codes and scales) and constant bytes.
      std::vector<float> ones(un, 1.0f), alternating(un);
      for (size_t i = 0; i < un; ++i) alternating[i] = (i % 2) ? -1.0f : 1.0f;
      // Constant bytes with finite fp16 scales: 0xFF puts every code and packed scale/min
      // at its maximum (Q6_K scales −1, Q8_0 codes −1); 0x80 gives Q8_0 codes −128 and
      // Q6_K scales −128.
      auto constant_bytes = [&](uint8_t byte) {
        std::vector<uint8_t> w(static_cast<size_t>(dtype_row_bytes(c.weight_type, n)), byte);
        const std::vector<uint8_t> rnd = random_weight_bytes(c.weight_type, n, rng);
        const size_t bb = static_cast<size_t>(dtype_traits(c.weight_type).block_bytes);
        const size_t d_off = c.weight_type == DType::Q6_K ? offsetof(BlockQ6_K, d) : 0;
        const size_t d_len = (c.weight_type == DType::Q4_K || c.weight_type == DType::Q5_K) ? 4 : 2;
        for (size_t b = 0; b < w.size(); b += bb) std::memcpy(w.data() + b + d_off, rnd.data() + b + d_off, d_len);
        return w;
      };
      const std::vector<std::pair<std::string, std::vector<uint8_t>>> weights = {
          {"max codes", quantize_weights(c.weight_type, ones)},
          {"±max codes", quantize_weights(c.weight_type, alternating)},
          {"all-0xFF bytes", constant_bytes(0xFF)},
          {"all-0x80 bytes", constant_bytes(0x80)}};
      // Activations: ±127 patterns, all −127, all +127, zeros; for Q8_K also all −128
      // (format-legal) and all +127 built by hand.
      std::vector<float> mixed(un), neg(un, -1.0f), pos(un, 1.0f), zero(un, 0.0f);
      for (size_t i = 0; i < un; ++i) mixed[i] = (i % 3 == 0) ? -1.0f : 1.0f;
      std::vector<std::vector<uint8_t>> acts = {quantize_acts(at, mixed), quantize_acts(at, neg),
                                                quantize_acts(at, pos), quantize_acts(at, zero)};
      if (at == DType::Q8_K) {
        acts[2] = constant_q8k_row(n, -128);
        acts.push_back(constant_q8k_row(n, 127));
      }
      const ActRows rows = pack_rows(acts);
      for (const auto& [what, w] : weights) {
        for (const auto& a : acts) expect_single_matches_scalar(c, w, a, n, what);
        expect_multi_matches_single(c, w, rows, n, what);
        EXPECT_EQ(c.single(n, w.data(), acts[3].data()), 0.0f) << dtype_name(c.weight_type) << " zero activations";
      }
    }
  }
}

// Readable bytes between two inaccessible guard pages: a kernel that reads a byte before
// or after the rows it was given faults instead of passing by luck. The wide Q8_0 / Q4_0
// steps read the fp16 scales with 64-byte loads from block starts, which must stay inside
// the row (ScaleLoads in avx512_util.h).
class GuardedBytes {
 public:
#ifdef _WIN32
  explicit GuardedBytes(size_t size) {
    SYSTEM_INFO si{};
    GetSystemInfo(&si);
    page_ = si.dwPageSize;
    data_pages_ = (size + page_ - 1) / page_;
    const size_t total = (data_pages_ + 2) * page_;
    void* p = VirtualAlloc(nullptr, total, MEM_RESERVE | MEM_COMMIT, PAGE_NOACCESS);
    if (p == nullptr) return;
    base_ = static_cast<uint8_t*>(p);
    DWORD old = 0;
    if (!VirtualProtect(base_ + page_, data_pages_ * page_, PAGE_READWRITE, &old)) {
      VirtualFree(base_, 0, MEM_RELEASE);
      base_ = nullptr;
    }
  }
  ~GuardedBytes() {
    if (base_) VirtualFree(base_, 0, MEM_RELEASE);
  }
#else
  explicit GuardedBytes(size_t size) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    data_pages_ = (size + page_ - 1) / page_;
    const size_t total = (data_pages_ + 2) * page_;
    void* p = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(p);
    if (mprotect(base_ + page_, data_pages_ * page_, PROT_READ | PROT_WRITE) != 0) {
      munmap(base_, total);
      base_ = nullptr;
    }
  }
  ~GuardedBytes() {
    if (base_) munmap(base_, (data_pages_ + 2) * page_);
  }
#endif
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  bool ok() const { return base_ != nullptr; }
  uint8_t* first() const { return base_ + page_; }                       // right after the low guard
  uint8_t* end() const { return base_ + page_ + data_pages_ * page_; }   // the high guard

 private:
  uint8_t* base_ = nullptr;
  size_t page_ = 0, data_pages_ = 0;
};

TEST(DotKernelsAvx512, IntegerKernelsReadOnlyTheirRows) {
  if (!has_avx512_set(cpu_features())) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  std::mt19937 rng(17);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (const Case& c : kIntegerCases) {
    const DType at = act_type(c.weight_type);
    for (int64_t n : integer_shapes(c.weight_type)) {
      std::vector<float> wf(static_cast<size_t>(n));
      for (auto& v : wf) v = gauss(rng) * 0.05f;
      const std::vector<uint8_t> w = quantize_weights(c.weight_type, wf);
      std::vector<std::vector<uint8_t>> acts;
      for (int j = 0; j < kMaxDotRows; ++j) {
        std::vector<float> af(static_cast<size_t>(n));
        for (auto& v : af) v = gauss(rng);
        acts.push_back(quantize_acts(at, af));
      }
      const size_t wb = w.size(), ab = acts[0].size();
      GuardedBytes wbuf(wb), abuf(kMaxDotRows * ab);
      ASSERT_TRUE(wbuf.ok() && abuf.ok());
      for (int n_act = 1; n_act <= kMaxDotRows; ++n_act) {
        // Rows flush against the high guard, then against the low one (dense activation rows).
        for (bool at_end : {true, false}) {
          uint8_t* wp = at_end ? wbuf.end() - wb : wbuf.first();
          uint8_t* ap = at_end ? abuf.end() - n_act * ab : abuf.first();
          std::memcpy(wp, w.data(), wb);
          for (int j = 0; j < n_act; ++j) std::memcpy(ap + j * ab, acts[static_cast<size_t>(j)].data(), ab);
          float out[kMaxDotRows] = {};
          c.multi(n, wp, ap, static_cast<int64_t>(ab), n_act, out);
          for (int j = 0; j < n_act; ++j) {
            const float single = c.single(n, wp, ap + j * ab);
            const float ref = scalar_dot_kernel(c.weight_type)->fn(n, w.data(), acts[static_cast<size_t>(j)].data());
            EXPECT_EQ(bits(out[j]), bits(ref)) << dtype_name(c.weight_type) << " n=" << n << " n_act=" << n_act;
            EXPECT_EQ(bits(single), bits(ref)) << dtype_name(c.weight_type) << " n=" << n;
          }
        }
      }
    }
  }
}

// Bound for the float families (u = 2^-24, u_d = 2^-53, S = Σ_i |w_i·a_i| over the exactly
// converted values; γ_k(v) = k·v / (1 − k·v), the bound on k rounded additions of terms
// whose magnitudes sum to S, for any summation tree of depth k — Higham):
//  - the kernel (float_avx512.cpp) adds every exact product (float × float fits a double)
//    into one double lane with an FMA: at most ⌊n/32⌋ + 3 + 1 FMAs per lane (main loop,
//    ≤ 3 8-element steps, 1 masked step), then (acc0 + acc1) + (acc2 + acc3) (2 levels)
//    and an 8 → 1 lane tree (3): k = ⌊n/32⌋ + 9 double roundings, so its double sum is
//    within γ_k(u_d)·S of the exact one, and the final rounding to float adds ≤ u·S·(1 + γ).
//  - the scalar reference sums in double left to right (≤ γ_n(u_d)·S) and rounds once to
//    float (≤ u·S·(1 + γ)).
// Hence |kernel − reference| ≤ (2u + (γ_k(u_d) + γ_n(u_d))·(1 + u))·S.
double float_bound(int64_t n, double s) {
  const double u = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -53);
  const double k = static_cast<double>(n / 32 + 9);
  const double gamma_k = k * ud / (1 - k * ud);
  const double gamma_n = n * ud / (1 - n * ud);
  return (2 * u + (gamma_k + gamma_n) * (1 + u)) * s;
}

std::vector<uint8_t> float_row(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() * (t == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      const uint16_t h = t == DType::F16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

double float_value(DType t, const std::vector<uint8_t>& row, size_t i) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, row.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, row.data() + 2 * i, 2);
  return t == DType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

TEST(DotKernelsAvx512, FloatFamiliesWithinDerivedBoundAndMultiBitIdentical) {
  if (!has_avx512_set(cpu_features())) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (const Case& c : kFloatCases) {
    for (int64_t n : {1, 15, 16, 17, 63, 64, 100, 2048, 2049, 11264}) {
      const size_t un = static_cast<size_t>(n);
      std::vector<float> wf(un);
      for (auto& v : wf) v = gauss(rng) * 0.05f;
      const std::vector<uint8_t> w = float_row(c.weight_type, wf);
      std::vector<std::vector<uint8_t>> acts;
      for (int j = 0; j < kMaxDotRows; ++j) {
        std::vector<float> af(un);
        // Row 3 has a positive mean: its terms do not cancel, unlike the others.
        for (auto& v : af) v = j == 3 ? 1.0f + gauss(rng) * 0.1f : gauss(rng) * (j % 2 ? 3.0f : 0.5f);
        acts.push_back(float_row(c.weight_type, af));
      }
      for (const auto& a : acts) {
        double s = 0;
        for (size_t i = 0; i < un; ++i) s += std::fabs(float_value(c.weight_type, w, i) * float_value(c.weight_type, a, i));
        const float ref = scalar_dot_kernel(c.weight_type)->fn(n, w.data(), a.data());
        const float got = c.single(n, w.data(), a.data());
        EXPECT_LE(std::fabs(double{got} - double{ref}), float_bound(n, s))
            << dtype_name(c.weight_type) << " n=" << n << " avx512=" << got << " scalar=" << ref;
      }
      expect_multi_matches_single(c, w, pack_rows(acts), n, "random");
    }
  }
}

}  // namespace
}  // namespace moetier::cpu
