// The Q4_K, Q5_K, Q6_K and IQ4_XS · Q8_K tile kernels with AVX512-VNNI + VL (EVEX-encoded
// 256-bit VPDPBUSD / VPDPWSSD; the one-token x8 kernels with 512-bit VPDPBUSD, two steps per
// instruction, which keeps decoding of the interleaved groups at least as fast as the
// 512-bit row kernels): kquant_tile_driver.h.
#include "cpu/dot/kquant_tile_driver.h"
#include "cpu/dot/kquant_tile_iq4_xs.h"
#include "cpu/dot/kquant_tile_q4_k_q5_k.h"
#include "cpu/dot/kquant_tile_q6_k.h"

namespace moetier::cpu::dot {

namespace kquant_tile {
namespace {
struct Avx512Steps {
  static constexpr bool kI16Pairs = false, kWide512 = true;
  __attribute__((always_inline)) static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
  }
  __attribute__((always_inline)) static __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
  }
};
}  // namespace
}  // namespace kquant_tile

using kquant_tile::Avx512Steps;

void q4_k_q8_k_avx512_tile(const TileDotArgs& args) { kquant_tile::tile<Avx512Steps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile(const TileDotArgs& args) { kquant_tile::tile<Avx512Steps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx512_tile(const TileDotArgs& args) { kquant_tile::tile<Avx512Steps, kquant_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avx512_tile(const TileDotArgs& args) { kquant_tile::tile<Avx512Steps, kquant_tile::IQ4XSFamily>(args); }

void q4_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx512Steps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx512Steps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avx512_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<Avx512Steps, kquant_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avx512_tile_x8(const TileDotArgs& args) {
  kquant_tile::tile_x8<Avx512Steps, kquant_tile::IQ4XSFamily>(args);
}

}  // namespace moetier::cpu::dot
