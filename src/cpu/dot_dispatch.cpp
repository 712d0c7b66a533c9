// Kernel tables: which dot product serves which weight type on this CPU. The scalar
// references are always present; ISA variants are added by their own translation units.
#include "cpu/dot.h"

namespace moetier::cpu {

namespace {

constexpr DotKernel kScalarKernels[] = {
    {DType::F32, DType::F32, dot::f32_f32_scalar, "scalar"},
    {DType::F16, DType::F16, dot::f16_f16_scalar, "scalar"},
    {DType::BF16, DType::BF16, dot::bf16_bf16_scalar, "scalar"},
    {DType::Q4_0, DType::Q8_0, dot::q4_0_q8_0_scalar, "scalar"},
    {DType::Q8_0, DType::Q8_0, dot::q8_0_q8_0_scalar, "scalar"},
    {DType::Q4_K, DType::Q8_K, dot::q4_k_q8_k_scalar, "scalar"},
    {DType::Q5_K, DType::Q8_K, dot::q5_k_q8_k_scalar, "scalar"},
    {DType::Q6_K, DType::Q8_K, dot::q6_k_q8_k_scalar, "scalar"},
    {DType::IQ4_XS, DType::Q8_K, dot::iq4_xs_q8_k_scalar, "scalar"},
};

}  // namespace

const DotKernel* scalar_dot_kernel(DType weight_type) {
  for (const auto& k : kScalarKernels) {
    if (k.weight_type == weight_type) return &k;
  }
  return nullptr;
}

std::optional<DType> activation_type_for(DType weight_type) {
  const DotKernel* k = scalar_dot_kernel(weight_type);
  if (!k) return std::nullopt;
  return k->activation_type;
}

const DotKernel* best_dot_kernel(DType weight_type, const CpuFeatures& cpu) {
  if (cpu.has_avx512_set()) {
    for (const auto& k : avx512_dot_kernels()) {
      if (k.weight_type == weight_type) return &k;
    }
  }
  if (cpu.has_avx2_set() && cpu.avxvnni) {
    for (const auto& k : avxvnni_dot_kernels()) {
      if (k.weight_type == weight_type) return &k;
    }
  }
  if (cpu.has_avx2_set()) {
    for (const auto& k : avx2_dot_kernels()) {
      if (k.weight_type == weight_type) return &k;
    }
  }
  return scalar_dot_kernel(weight_type);
}

}  // namespace moetier::cpu
