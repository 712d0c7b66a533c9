// The IQ4_XS · Q8_K tile kernels for AVX2 without VNNI (compiled with -mavx2 -mfma -mf16c).
// The VNNI kernels shift IQ4_XS's grid by 128 into unsigned bytes (up to 241), which
// VPDPBUSD's emulation cannot take (kquant_tile_avx2.cpp). Here the codes are the signed grid
// values c ∈ [−127, 113] (MOETIER_TILE_SIGNED_GRID, kquant_tile_impl.h) and each step is
// avx2_util.h's dpbusd_signed, VPMADDUBSW(|c|, sign(q_a, c)): |c|·|q_a| ≤ 127·127, a pair
// ≤ 32258, so nothing saturates and Σ |c|·sign(c)·q_a = Σ c·q_a exactly. With no offset the
// mins term is 0, and every integer sum is the VNNI kernels' scaled − mins: bit-identical
// to the scalar reference (DotKernelsTile.Avx2BitIdenticalToScalar).
#include "cpu/dot/avx2_util.h"

#define MOETIER_TILE_SIGNED_GRID 1
#define MOETIER_TILE_DPBUSD ::moetier::cpu::dot::avx2::dpbusd_signed
#define MOETIER_TILE_DPWSSD ::moetier::cpu::dot::avx2::madd_acc  // one token: pairs × (sc, sc)
#define MOETIER_TILE_PAIRS ::moetier::cpu::dot::avx2::pairs_s8s8  // int16 sums of steps
#define MOETIER_TILE_ADD_I16 ::moetier::cpu::dot::avx2::add_i16_in_order
#define MOETIER_TILE_NS avx2_tile_iq4
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

void iq4_xs_q8_k_avx2_tile(const TileDotArgs& args) { avx2_tile_iq4::tile<avx2_tile_iq4::IQ4XSFamily>(args); }
void iq4_xs_q8_k_avx2_tile_x8(const TileDotArgs& args) { avx2_tile_iq4::tile_x8<avx2_tile_iq4::IQ4XSFamily>(args); }

}  // namespace moetier::cpu::dot
