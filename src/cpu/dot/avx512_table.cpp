// The AVX-512 (F, BW, VL, VNNI) kernel table. Compiled without ISA flags: it only holds
// function pointers, which best_dot_kernel hands out after checking the CPU features.
// Families missing here fall back to the AVX2 table, then to scalar.
#include "cpu/dot.h"

namespace moetier::cpu {

std::span<const DotKernel> avx512_dot_kernels() { return {}; }

}  // namespace moetier::cpu
