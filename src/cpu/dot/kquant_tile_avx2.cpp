// The Q4_K, Q5_K and Q6_K · Q8_K tile kernels for AVX2 without VNNI (Zen 2/3, Skylake-era
// CPUs; compiled with -mavx2 -mfma -mf16c). The same source as the VNNI units
// (kquant_tile_impl.h), with VPDPBUSD emulated as VPMADDUBSW (pairs of u·s summed in int16)
// then VPMADDWD by 1 and VPADDD, and VPDPWSSD as VPMADDWD then VPADDD (avx2_util.h's dpbusd
// and madd_acc).
//
// Exactness: VPMADDUBSW saturates a pair's sum to int16, so the emulation equals VPDPBUSD
// only while |u0·s0 + u1·s1| ≤ 32767. The activations are Q8_K codes, |s| ≤ 127
// (quantize_row_q8_k scales the block's extreme to ∓127), and the codes u are ≤ 15 (Q4_K),
// ≤ 31 (Q5_K) and ≤ 63 (Q6_K, the stored q + 32): at most 2·63·127 = 16002. IQ4_XS's codes
// (grid + 128, up to 241) would overflow (2·241·127 = 61214), so its AVX2 kernels keep the
// signed grid values instead (iq4_xs_tile_avx2.cpp). VPMADDWD never saturates for these
// operands (its one overflow case, both pairs −32768·−32768, needs int16 −32768 on both
// sides). So every integer sum is the VNNI kernels', and the results are bit-identical to
// the scalar reference (DotKernelsTile.Avx2BitIdenticalToScalar). Both prompts and one
// token (decode) sum several steps' pairs in int16 before one VPMADDWD by the scales
// (MOETIER_TILE_PAIRS, kquant_tile_impl.h).
#include "cpu/dot/avx2_util.h"

#define MOETIER_TILE_DPBUSD ::moetier::cpu::dot::avx2::dpbusd
#define MOETIER_TILE_DPWSSD ::moetier::cpu::dot::avx2::madd_acc
#define MOETIER_TILE_PAIRS ::moetier::cpu::dot::avx2::pairs_u8s8  // int16 sums of steps
#define MOETIER_TILE_ADD_I16 ::moetier::cpu::dot::avx2::add_i16_in_order
#define MOETIER_TILE_NS avx2_tile
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

void q4_k_q8_k_avx2_tile(const TileDotArgs& args) { avx2_tile::tile<avx2_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx2_tile(const TileDotArgs& args) { avx2_tile::tile<avx2_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx2_tile(const TileDotArgs& args) { avx2_tile::tile<avx2_tile::Q6KFamily>(args); }

void q4_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { avx2_tile::tile_x8<avx2_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { avx2_tile::tile_x8<avx2_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx2_tile_x8(const TileDotArgs& args) { avx2_tile::tile_x8<avx2_tile::Q6KFamily>(args); }

}  // namespace moetier::cpu::dot
