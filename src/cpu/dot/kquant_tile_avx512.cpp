// The Q4_K, Q5_K, Q6_K and IQ4_XS · Q8_K tile kernels with AVX512-VNNI + VL (EVEX-encoded 256-bit VPDPBUSD / VPDPWSSD).
// The kernels and their exactness argument: kquant_tile_impl.h.
#define MOETIER_TILE_DPBUSD _mm256_dpbusd_epi32
#define MOETIER_TILE_DPWSSD _mm256_dpwssd_epi32
#define MOETIER_TILE_NS avx512_tile
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

// The interleaved forms exist for Q4_K and Q5_K only: for Q6_K and IQ4_XS the 512-bit
// row kernels decode faster than the 256-bit one-token x8 kernel (one core, 128 MB
// streamed: Q6_K 34.5 against 29.4 GB/s, IQ4_XS 27.5 against 16.9), so on AVX-512 those
// experts keep the file's layout.

void q4_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avx512_tile(const TileDotArgs& args) { avx512_tile::tile<avx512_tile::IQ4XSFamily>(args); }

void q4_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { avx512_tile::tile_x8<avx512_tile::Q5KFamily>(args); }

}  // namespace moetier::cpu::dot
