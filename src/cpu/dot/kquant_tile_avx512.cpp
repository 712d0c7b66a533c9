// The Q4_K, Q5_K, Q6_K and IQ4_XS · Q8_K tile kernels with AVX512-VNNI + VL (EVEX-encoded 256-bit VPDPBUSD / VPDPWSSD;
// the one-token x8 kernels with 512-bit VPDPBUSD, two steps per instruction, which keeps decoding of the
// interleaved groups at least as fast as the 512-bit row kernels).
// The kernels and their exactness argument: kquant_tile_impl.h.
#define MOETIER_TILE_DPBUSD _mm256_dpbusd_epi32
#define MOETIER_TILE_DPWSSD _mm256_dpwssd_epi32
#define MOETIER_TILE_NS avx512_tile
#define MOETIER_TILE_512 1  // one-token x8 kernels with 512-bit VPDPBUSD (x8_one_token_512)
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

void q4_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::IQ4XSFamily>(args); }

void q4_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::IQ4XSFamily>(args); }

}  // namespace moetier::cpu::dot
