// SiLU over arrays, lane by lane: silu_in_place(x) and swiglu(gate, up) = silu(gate) · up,
// each element bit for bit silu() of cpu/ops.h (x / (1 + e^−x) with math::exp_f32). One
// source (silu_impl.h) compiled for the base ISA (silu.cpp) and per tier (silu_<tier>.cpp),
// without contraction, so every build gives the same bits; cpu/ops.h's swiglu and
// silu_in_place run the build of the CPU's tier.
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace moetier::cpu {

struct SiluKernels {
  // out[i] = silu(gate[i]) · up[i] for i < n; out may be gate or up (element-wise, in place).
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out);
  void (*silu_in_place)(float* x, int64_t n);
  IsaTier tier;  // the build
};
// The build that serves a tier (AVX-VNNI has none of its own: AVX2's serves it). Only call
// a tier's build where isa_tier_runs_on(tier, cpu).
const SiluKernels& silu_kernels(IsaTier tier);

namespace silu_lanes {
// The builds, one per unit (silu_kernels picks among them).
extern const SiluKernels kScalarBuild;
extern const SiluKernels kAvx2Build;
extern const SiluKernels kAvx512Build;
}  // namespace silu_lanes

}  // namespace moetier::cpu
