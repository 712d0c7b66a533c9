// The AVX2 + AVX-VNNI kernel table: the integer kernels' VNNI builds (float weights have no
// integer products: best_dot_kernel falls through to the AVX2 table for them). Compiled
// without ISA flags: it only holds function pointers.
#include "cpu/dot.h"

namespace moetier::cpu {

namespace {

constexpr DotKernel kAvxVnniKernels[] = {
    {DType::Q4_0, DType::Q8_0, dot::q4_0_q8_0_avxvnni, "avxvnni", dot::q4_0_q8_0_avxvnni_multi},
    {DType::Q8_0, DType::Q8_0, dot::q8_0_q8_0_avxvnni, "avxvnni", dot::q8_0_q8_0_avxvnni_multi,
     dot::q8_0_q8_0_avxvnni_tile},
    {DType::Q4_K, DType::Q8_K, dot::q4_k_q8_k_avxvnni, "avxvnni", dot::q4_k_q8_k_avxvnni_multi,
     dot::q4_k_q8_k_avxvnni_tile, dot::q4_k_q8_k_avxvnni_tile_x8},
    {DType::Q5_K, DType::Q8_K, dot::q5_k_q8_k_avxvnni, "avxvnni", dot::q5_k_q8_k_avxvnni_multi,
     dot::q5_k_q8_k_avxvnni_tile, dot::q5_k_q8_k_avxvnni_tile_x8},
    {DType::Q6_K, DType::Q8_K, dot::q6_k_q8_k_avxvnni, "avxvnni", dot::q6_k_q8_k_avxvnni_multi,
     dot::q6_k_q8_k_avxvnni_tile, dot::q6_k_q8_k_avxvnni_tile_x8},
    {DType::IQ4_XS, DType::Q8_K, dot::iq4_xs_q8_k_avxvnni, "avxvnni", dot::iq4_xs_q8_k_avxvnni_multi,
     dot::iq4_xs_q8_k_avxvnni_tile, dot::iq4_xs_q8_k_avxvnni_tile_x8},
};

}  // namespace

std::span<const DotKernel> avxvnni_dot_kernels() { return kAvxVnniKernels; }

}  // namespace moetier::cpu
