// The AVX2 + FMA + F16C kernel table. Compiled without ISA flags: it only holds function
// pointers, which best_dot_kernel hands out after checking the CPU features.
#include "cpu/dot.h"

namespace moetier::cpu {

namespace {

constexpr DotKernel kAvx2Kernels[] = {
    {DType::Q8_0, DType::Q8_0, dot::q8_0_q8_0_avx2, "avx2"},
    {DType::Q4_K, DType::Q8_K, dot::q4_k_q8_k_avx2, "avx2"},
    {DType::Q6_K, DType::Q8_K, dot::q6_k_q8_k_avx2, "avx2"},
};

}  // namespace

std::span<const DotKernel> avx2_dot_kernels() { return kAvx2Kernels; }

}  // namespace moetier::cpu
