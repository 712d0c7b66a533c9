// The IQ4_XS · Q8_K tile kernels for AVX2 without VNNI (compiled with -mavx2 -mfma -mf16c).
// The VNNI kernels shift IQ4_XS's grid by 128 into unsigned bytes (up to 241), which
// VPDPBUSD's emulation cannot take (kquant_tile_avx2.cpp). Here the codes are the signed grid
// values c ∈ [−127, 113] (MOETIER_TILE_SIGNED_GRID, kquant_tile_impl.h) and each step is
// VPMADDUBSW(|c|, sign(q_a, c)): |c|·|q_a| ≤ 127·127, a pair ≤ 32258, so nothing saturates and
// Σ |c|·sign(c)·q_a = Σ c·q_a exactly. With no offset the mins term is 0, and every integer
// sum is the VNNI kernels' scaled − mins: bit-identical to the scalar reference
// (DotKernelsTile.Avx2BitIdenticalToScalar).
#include <immintrin.h>

namespace {

// acc + Σ of 4 products c·s per int32 lane, c and s signed bytes with |c|, |s| ≤ 127.
inline __m256i dot_signed_codes(__m256i acc, __m256i c, __m256i s) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(s, c));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
// acc + Σ of the two int16 products per int32 lane (the min pairs, all 0 here).
inline __m256i dpwssd_by_madd(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }

}  // namespace

#define MOETIER_TILE_SIGNED_GRID 1
#define MOETIER_TILE_DPBUSD dot_signed_codes
#define MOETIER_TILE_DPWSSD dpwssd_by_madd
#define MOETIER_TILE_NS avx2_tile_iq4
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

void iq4_xs_q8_k_avx2_tile(const TileDotArgs& args) { avx2_tile_iq4::tile<avx2_tile_iq4::IQ4XSFamily>(args); }
void iq4_xs_q8_k_avx2_tile_x8(const TileDotArgs& args) { avx2_tile_iq4::tile_x8<avx2_tile_iq4::IQ4XSFamily>(args); }

}  // namespace moetier::cpu::dot
