// The Q4_K, Q5_K, Q6_K and IQ4_XS · Q8_K tile kernels with AVX-VNNI (VEX-encoded 256-bit
// VPDPBUSD / VPDPWSSD; compiled with -mavxvnni): kquant_tile_driver.h.
#include "cpu/dot/kquant_tile_driver.h"
#include "cpu/dot/kquant_tile_iq4_xs.h"
#include "cpu/dot/kquant_tile_q4_k_q5_k.h"
#include "cpu/dot/kquant_tile_q6_k.h"

namespace moetier::cpu::dot {

namespace kquant_tile {
namespace {
struct AvxVnniSteps {
  static constexpr bool kI16Pairs = false, kWide512 = false;
  __attribute__((always_inline)) static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  }
  __attribute__((always_inline)) static __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_avx_epi32(acc, a, b);
  }
};
}  // namespace
}  // namespace kquant_tile

using kquant_tile::AvxVnniSteps;

void q4_k_q8_k_avxvnni_tile(const TileDotArgs& args) { kquant_tile::tile<AvxVnniSteps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avxvnni_tile(const TileDotArgs& args) { kquant_tile::tile<AvxVnniSteps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avxvnni_tile(const TileDotArgs& args) { kquant_tile::tile<AvxVnniSteps, kquant_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avxvnni_tile(const TileDotArgs& args) { kquant_tile::tile<AvxVnniSteps, kquant_tile::IQ4XSFamily>(args); }

void q4_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<AvxVnniSteps, kquant_tile::Q4KFamily>(args); }
void q5_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<AvxVnniSteps, kquant_tile::Q5KFamily>(args); }
void q6_k_q8_k_avxvnni_tile_x8(const TileDotArgs& args) { kquant_tile::tile_x8<AvxVnniSteps, kquant_tile::Q6KFamily>(args); }
void iq4_xs_q8_k_avxvnni_tile_x8(const TileDotArgs& args) {
  kquant_tile::tile_x8<AvxVnniSteps, kquant_tile::IQ4XSFamily>(args);
}

}  // namespace moetier::cpu::dot
