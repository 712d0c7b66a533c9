// The Q4_K, Q5_K and Q6_K · Q8_K tile kernels for AVX2 without VNNI (Zen 2/3, Skylake-era
// CPUs; compiled with -mavx2 -mfma -mf16c): kquant_tile_driver.h with int16 step sums
// (VPMADDUBSW pairs added in int16, then one VPMADDWD by the scales) and VPDPWSSD emulated as
// VPMADDWD then VPADDD (avx2_util.h).
//
// Exactness: VPMADDUBSW saturates a pair's sum to int16, so the pairs are exact only while
// |u0·s0 + u1·s1| ≤ 32767. The activations are Q8_K codes, |s| ≤ 127 (quantize_row_q8_k
// scales the block's extreme to ∓127), and the codes u are ≤ 15 (Q4_K), ≤ 31 (Q5_K) and ≤ 63
// (Q6_K, the stored q + 32): at most 2·63·127 = 16002; the int16 step sums stay within int16
// by construction (i16_steps). IQ4_XS's codes (grid + 128, up to 241) would overflow
// (2·241·127 = 61214), so its AVX2 kernels keep the signed grid values instead
// (iq4_xs_tile_avx2.cpp). VPMADDWD never saturates for these operands (its one overflow case,
// both pairs −32768·−32768, needs int16 −32768 on both sides). So every integer sum is the
// VNNI kernels', and the results are bit-identical to the scalar reference
// (DotKernelsTile.Avx2BitIdenticalToScalar).
#include "cpu/dot/avx2_util.h"
#include "cpu/dot/kquant_tile_driver.h"
#include "cpu/dot/kquant_tile_q4_k_q5_k.h"
#include "cpu/dot/kquant_tile_q6_k.h"

namespace moetier::cpu::dot {

namespace kquant_tile {
namespace {
struct Avx2Steps {
  static constexpr bool kI16Pairs = true, kWide512 = false;
  __attribute__((always_inline)) static __m256i pairs(__m256i u, __m256i s) { return avx2::pairs_u8s8(u, s); }
  __attribute__((always_inline)) static __m256i add_i16(__m256i a, __m256i b) { return avx2::add_i16_in_order(a, b); }
  __attribute__((always_inline)) static __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return avx2::madd_acc(acc, a, b);
  }
};
}  // namespace
}  // namespace kquant_tile

using kquant_tile::Avx2Steps;

void q4_k_q8_k_avx2_tile(const TileDotArgs& args) { kquant_tile::tile<Avx2Steps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx2_tile(const TileDotArgs& args) { kquant_tile::tile<Avx2Steps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx2_tile(const TileDotArgs& args) { kquant_tile::tile<Avx2Steps, kquant_tile::Q6KFamily>(args); }

void q4_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx2Steps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx2Steps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx2Steps, kquant_tile::Q6KFamily>(args); }

}  // namespace moetier::cpu::dot
