// The IQ4_XS · Q8_K tile kernels for AVX2 without VNNI (compiled with -mavx2 -mfma -mf16c).
// The VNNI kernels shift IQ4_XS's grid by 128 into unsigned bytes (up to 241), whose pairs
// VPMADDUBSW cannot take exactly (kquant_tile_avx2.cpp). Here the codes are the signed grid
// values c ∈ [−127, 113] (IQ4XSSignedFamily, kquant_tile_iq4_xs.h) and each step's pairs are
// avx2_util.h's pairs_s8s8, VPMADDUBSW(|c|, sign(q_a, c)): |c|·|q_a| ≤ 127·127, a pair
// ≤ 32258, so nothing saturates and Σ |c|·sign(c)·q_a = Σ c·q_a exactly. With no offset the
// mins term is 0, and every integer sum is the VNNI kernels' scaled − mins: bit-identical to
// the scalar reference (DotKernelsTile.Avx2BitIdenticalToScalar).
#include "cpu/dot/avx2_util.h"
#include "cpu/dot/kquant_tile_driver.h"
#include "cpu/dot/kquant_tile_iq4_xs.h"

namespace moetier::cpu::dot {

namespace kquant_tile {
namespace {
struct Avx2SignedSteps {
  static constexpr bool kI16Pairs = true, kWide512 = false;
  __attribute__((always_inline)) static __m256i pairs(__m256i c, __m256i s) { return avx2::pairs_s8s8(c, s); }
  __attribute__((always_inline)) static __m256i add_i16(__m256i a, __m256i b) { return avx2::add_i16_in_order(a, b); }
  // One token: the pairs' sums × (sc, sc).
  __attribute__((always_inline)) static __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return avx2::madd_acc(acc, a, b);
  }
};
}  // namespace
}  // namespace kquant_tile

using kquant_tile::Avx2SignedSteps;

void iq4_xs_q8_k_avx2_tile(const TileDotArgs& args) {
  kquant_tile::tile<Avx2SignedSteps, kquant_tile::IQ4XSSignedFamily>(args);
}
void iq4_xs_q8_k_avx2_tile_x8(const TileDotArgs& args) {
  kquant_tile::tile_x8<Avx2SignedSteps, kquant_tile::IQ4XSSignedFamily>(args);
}

}  // namespace moetier::cpu::dot
