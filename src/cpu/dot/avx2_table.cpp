// The AVX2 + FMA + F16C kernel table. Compiled without ISA flags: it only holds function
// pointers, which best_dot_kernel hands out after checking the CPU features.
#include "cpu/dot.h"

namespace moetier::cpu {

namespace {

constexpr DotKernel kAvx2Kernels[] = {
    {DType::F32, DType::F32, dot::f32_f32_avx2, "avx2", dot::f32_f32_avx2_multi},
    {DType::F16, DType::F16, dot::f16_f16_avx2, "avx2", dot::f16_f16_avx2_multi},
    {DType::BF16, DType::BF16, dot::bf16_bf16_avx2, "avx2", dot::bf16_bf16_avx2_multi},
    {DType::Q4_0, DType::Q8_0, dot::q4_0_q8_0_avx2, "avx2", dot::q4_0_q8_0_avx2_multi},
    {DType::Q8_0, DType::Q8_0, dot::q8_0_q8_0_avx2, "avx2", dot::q8_0_q8_0_avx2_multi, dot::q8_0_q8_0_avx2_tile},
    {DType::Q4_K, DType::Q8_K, dot::q4_k_q8_k_avx2, "avx2", dot::q4_k_q8_k_avx2_multi, dot::q4_k_q8_k_avx2_tile,
     dot::q4_k_q8_k_avx2_tile_x8},
    {DType::Q5_K, DType::Q8_K, dot::q5_k_q8_k_avx2, "avx2", dot::q5_k_q8_k_avx2_multi, dot::q5_k_q8_k_avx2_tile,
     dot::q5_k_q8_k_avx2_tile_x8},
    {DType::Q6_K, DType::Q8_K, dot::q6_k_q8_k_avx2, "avx2", dot::q6_k_q8_k_avx2_multi, dot::q6_k_q8_k_avx2_tile,
     dot::q6_k_q8_k_avx2_tile_x8},
    {DType::IQ4_XS, DType::Q8_K, dot::iq4_xs_q8_k_avx2, "avx2", dot::iq4_xs_q8_k_avx2_multi, dot::iq4_xs_q8_k_avx2_tile,
     dot::iq4_xs_q8_k_avx2_tile_x8},
};

}  // namespace

std::span<const DotKernel> avx2_dot_kernels() { return kAvx2Kernels; }

}  // namespace moetier::cpu
