// Scalar reference conversions between f32 and every type moetier computes with.
// Bit-exact with ggml's block layouts (see blocks.h). These are the references the SIMD
// kernels are tested against; they are not the fast path.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace moetier {

// n: number of elements, a multiple of the type's block size.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeOps {
  DequantizeRowFn dequantize_row;  // blocks -> f32
  QuantizeRowFn quantize_row;      // f32 -> blocks (reference quality, no importance matrix)
};

// nullptr when moetier has no kernels for the type (dtype_traits(t).has_kernels == false).
const TypeOps* type_ops(DType type);

}  // namespace moetier
