// The Q4_K, Q5_K, Q6_K and IQ4_XS · Q8_K tile kernels with AVX-VNNI (VEX-encoded 256-bit VPDPBUSD / VPDPWSSD; compiled with -mavxvnni).
// The kernels and their exactness argument: kquant_tile_impl.h.
#define MOETIER_TILE_DPBUSD _mm256_dpbusd_avx_epi32
#define MOETIER_TILE_DPWSSD _mm256_dpwssd_avx_epi32
#define MOETIER_TILE_NS avxvnni_tile
#include "cpu/dot/kquant_tile_impl.h"

namespace moetier::cpu::dot {

void q4_k_q8_k_avxvnni_tile(const TileDotArgs& args) { avxvnni_tile::tile<avxvnni_tile::Q4KFamily>(args); }
void q5_k_q8_k_avxvnni_tile(const TileDotArgs& args) { avxvnni_tile::tile<avxvnni_tile::Q5KFamily>(args); }
void q6_k_q8_k_avxvnni_tile(const TileDotArgs& args) { avxvnni_tile::tile<avxvnni_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avxvnni_tile(const TileDotArgs& args) { avxvnni_tile::tile<avxvnni_tile::IQ4XSFamily>(args); }

void q4_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { avxvnni_tile::tile_x8<avxvnni_tile::Q4KFamily>(args); }
void q5_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { avxvnni_tile::tile_x8<avxvnni_tile::Q5KFamily>(args); }
void q6_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { avxvnni_tile::tile_x8<avxvnni_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { avxvnni_tile::tile_x8<avxvnni_tile::IQ4XSFamily>(args); }

}  // namespace moetier::cpu::dot
