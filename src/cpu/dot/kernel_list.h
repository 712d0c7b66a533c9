// The list of dot-product kernels: the declarations in cpu/dot.h and the per-tier tables in
// cpu/dot_dispatch.cpp are generated from it, so a family or a tier is added here once.
#pragma once

// The families, X(family, weight type, activation type): DType names. The family's kernels
// are named dot::<family>_<tier>[_multi|_tile|_tile_x8].
#define MOETIER_DOT_FAMILIES(X) \
  X(f32_f32, F32, F32)          \
  X(f16_f16, F16, F16)          \
  X(bf16_bf16, BF16, BF16)      \
  X(q4_0_q8_0, Q4_0, Q8_0)      \
  X(q8_0_q8_0, Q8_0, Q8_0)      \
  X(q4_k_q8_k, Q4_K, Q8_K)      \
  X(q5_k_q8_k, Q5_K, Q8_K)      \
  X(q6_k_q8_k, Q6_K, Q8_K)      \
  X(iq4_xs_q8_k, IQ4_XS, Q8_K)

// The kernels each tier builds, X(family, tier, forms); tier: a suffix of MOETIER_ISA_TIERS
// (cpu/isa.h). forms, each including the ones before it:
//   fn       VecDotFn   <family>_<tier>            (scalar references: cpu/dot/*_scalar.cpp)
//   multi    MultiDotFn <family>_<tier>_multi      (cpu/dot/<family>_<tier>.cpp)
//   tile     TileDotFn  <family>_<tier>_tile       (cpu/dot/*_tile_<tier>.cpp)
//   tile_x8  TileDotFn  <family>_<tier>_tile_x8    (interleaved rows, cpu/interleave.h)
// A family a tier does not list is served by the tier's fallback (cpu/isa.h): AVX-VNNI has
// no float kernels (no integer products to speed up), so AVX2's serve them.
#define MOETIER_DOT_KERNELS(X)       \
  X(f32_f32, scalar, fn)             \
  X(f16_f16, scalar, fn)             \
  X(bf16_bf16, scalar, fn)           \
  X(q4_0_q8_0, scalar, fn)           \
  X(q8_0_q8_0, scalar, fn)           \
  X(q4_k_q8_k, scalar, fn)           \
  X(q5_k_q8_k, scalar, fn)           \
  X(q6_k_q8_k, scalar, fn)           \
  X(iq4_xs_q8_k, scalar, fn)         \
                                     \
  X(f32_f32, avx2, multi)            \
  X(f16_f16, avx2, multi)            \
  X(bf16_bf16, avx2, multi)          \
  X(q4_0_q8_0, avx2, multi)          \
  X(q8_0_q8_0, avx2, tile_x8)         \
  X(q4_k_q8_k, avx2, tile_x8)        \
  X(q5_k_q8_k, avx2, tile_x8)        \
  X(q6_k_q8_k, avx2, tile_x8)        \
  X(iq4_xs_q8_k, avx2, tile_x8)      \
                                     \
  X(q4_0_q8_0, avxvnni, multi)       \
  X(q8_0_q8_0, avxvnni, tile_x8)      \
  X(q4_k_q8_k, avxvnni, tile_x8)     \
  X(q5_k_q8_k, avxvnni, tile_x8)     \
  X(q6_k_q8_k, avxvnni, tile_x8)     \
  X(iq4_xs_q8_k, avxvnni, tile_x8)   \
                                     \
  X(f32_f32, avx512, multi)          \
  X(f16_f16, avx512, multi)          \
  X(bf16_bf16, avx512, multi)        \
  X(q4_0_q8_0, avx512, multi)        \
  X(q8_0_q8_0, avx512, tile_x8)       \
  X(q4_k_q8_k, avx512, tile_x8)      \
  X(q5_k_q8_k, avx512, tile_x8)      \
  X(q6_k_q8_k, avx512, tile_x8)      \
  X(iq4_xs_q8_k, avx512, tile_x8)
