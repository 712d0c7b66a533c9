// The GPU kernels, as calls that record into a Device's stream. Shapes follow the CPU
// blocks (src/cpu/, src/model/blocks/): rows of f32 activations, weights in their GGUF
// block format. Each function checks what it needs (sizes within the buffers, supported
// types) and returns an error instead of recording a bad dispatch.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "gpu/vulkan/vk_device.h"
#include "tensor/dtype.h"

namespace moetier::vk {

// The activation type a weight type consumes on the GPU: the CPU's (cpu::activation_type_for).
Result<DType> gpu_activation_type(DType weight_type);

// x: n_rows rows of n_in f32, x_stride floats apart → out: rows of `type`
// (gpu_activation_row_bytes(type, n_in) bytes apart). F32 is a plain copy.
Status quantize_rows(Device& dev, DType type, const BufferRef& x, int64_t n_rows, int64_t n_in, int64_t x_stride,
                     const BufferRef& out);

// y[t][y_offset + o] = W[o] · xq[t] for t < n_tok, o < n_out; y rows are y_stride floats
// apart. xq rows: gpu_activation_type(w.type), x_row_bytes apart. For a stack, matrix `mat`.
Status matmul(Device& dev, const GpuMatrix& w, int64_t mat, const BufferRef& xq, uint64_t x_row_bytes, int64_t n_tok,
              const BufferRef& y, int64_t y_stride, int64_t y_offset = 0);

// Stack products: for pair z < n_pairs, y[z][o] = W[ids[z]][o] · xq[rows[z]] (u32 buffers).
Status matmul_id(Device& dev, const GpuMatrix& w, const BufferRef& xq, uint64_t x_row_bytes, const BufferRef& ids,
                 const BufferRef& rows, int64_t n_pairs, const BufferRef& y, int64_t y_stride);

}  // namespace moetier::vk
