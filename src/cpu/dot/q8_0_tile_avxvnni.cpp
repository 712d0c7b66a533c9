// The Q8_0 · Q8_0 tile kernel with AVX-VNNI (VEX-encoded 256-bit VPDPBUSD; compiled with
// -mavxvnni). The kernel and its exactness argument: q8_0_tile_impl.h.
#define MOETIER_TILE_DPBUSD _mm256_dpbusd_avx_epi32
#define MOETIER_TILE_NAME q8_0_q8_0_avxvnni_tile
#define MOETIER_TILE_X8_NAME q8_0_q8_0_avxvnni_tile_x8
#include "cpu/dot/q8_0_tile_impl.h"
