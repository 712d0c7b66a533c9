// The Q8_0 · Q8_0 tile kernel for AVX2 without VNNI (compiled with -mavx2 -mfma -mf16c):
// VPMADDUBSW on |w| and the activation with w's sign (avx2_util.h's dpbusd_signed) instead
// of VPDPBUSD on w + 128. The kernel and its exactness argument: q8_0_tile_impl.h.
#include "cpu/dot/avx2_util.h"

#define MOETIER_TILE_SIGNED_CODES 1
#define MOETIER_TILE_DPBUSD ::moetier::cpu::dot::avx2::dpbusd_signed
#define MOETIER_TILE_NAME q8_0_q8_0_avx2_tile
#define MOETIER_TILE_X8_NAME q8_0_q8_0_avx2_tile_x8
#include "cpu/dot/q8_0_tile_impl.h"
