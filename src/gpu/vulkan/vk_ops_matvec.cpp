// The fast mat-vec launchers (shaders/matvec.comp): decode-sized products, up to
// kMatvecMaxCols tokens per dispatch.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_ops_util.h"
#include "gpu/vulkan/vk_tuning.h"

namespace moetier::vk {

namespace {

using detail::u32;

// Lanes sharing one block in matvec.comp (lane_dot.glsl's TPB).
int64_t lanes_per_block(DType t) {
  switch (t) {
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: return 16;
    case DType::Q8_0: case DType::Q4_0: return 4;
    default: return 8;  // F32, F16, BF16: 4 values per lane, blocks of 32
  }
}

struct MatvecPush {
  uint32_t n_in, n_out, w_row_bytes, x_row_bytes, y_stride, y_offset, n_cols;
  uint32_t mat_bytes, mat_first, mat_count, n_pairs, accumulate;
};

// The launch shape: workgroup size and rows per workgroup (specialization constants 0, 1).
// Enough lanes to cover a row's blocks (rows of few blocks get a smaller workgroup instead
// of idle lanes), at least 32 so that a workgroup fills an NVIDIA/AMD-wave32 subgroup (and
// at least the subgroup), at most the vendor's cap (vk_tuning.h: 128). Two rows per workgroup share each activation block (llama.cpp's K-quant choice too).
struct Shape {
  uint32_t wg = 64, rows = 2;
};
Shape matvec_shape(const Device& dev, DType type, int64_t n_in) {
  const int64_t nb = n_in / detail::gpu_block_elems(type);
  const int64_t want = lanes_per_block(type) * nb;
  const int64_t floor = std::max<int64_t>(32, dev.info().subgroup_size);
  const int64_t cap = std::max<int64_t>(floor, vendor_defaults(dev.info()).matvec_max_workgroup);
  const int64_t wg = std::clamp<int64_t>(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(want))), floor, cap);
  return {.wg = u32(wg), .rows = 2};
}

Status check_shape(const GpuMatrix& w, const GpuMatrix* up) {
  const int64_t block = detail::gpu_block_elems(w.type);
  if (block == 0) return Status::bad_input(fmt::format("the GPU backend has no mat-vec for {} weights", dtype_name(w.type)));
  if (w.n_in % block != 0) {
    return Status::bad_input(fmt::format("GPU mat-vec: rows of {} {} weights are not whole blocks", w.n_in, dtype_name(w.type)));
  }
  if (up && (up->type != w.type || up->n_in != w.n_in || up->n_out != w.n_out || up->n_mat != w.n_mat ||
             up->parts.size() != w.parts.size())) {
    return Status::bad_input("GPU SwiGLU mat-vec: gate and up weights differ in type or shape");
  }
  return Status::ok();
}

}  // namespace

Status matvec(Device& dev, const MatmulArgs& a) {
  if (a.n_tok == 0) return Status::ok();
  const GpuMatrix& w = *a.w;
  RETURN_IF_ERROR(check_shape(w, a.up));
  const std::string shader =
      fmt::format("matvec{}_{}", a.up ? "_swiglu" : "", detail::lower(dtype_name(w.type)));
  const Shape shape = matvec_shape(dev, w.type, w.n_in);
  for (size_t pi = 0; pi < w.parts.size(); ++pi) {
    const auto& part = w.parts[pi];
    int64_t first_row = 0, n_rows = 0;
    BufferRef buf = part.buffer, buf_up = a.up ? a.up->parts[pi].buffer : BufferRef{};
    if (w.n_mat > 1) {
      if (a.mat < part.first || a.mat >= part.first + part.count) continue;
      const uint64_t mat_bytes = static_cast<uint64_t>(w.row_bytes * w.n_out);
      buf = part.buffer.slice(static_cast<uint64_t>(a.mat - part.first) * mat_bytes, mat_bytes);
      if (a.up) buf_up = buf_up.slice(static_cast<uint64_t>(a.mat - part.first) * mat_bytes, mat_bytes);
      n_rows = w.n_out;
    } else {
      first_row = part.first;
      n_rows = part.count;
    }
    const int64_t groups = (n_rows + shape.rows - 1) / shape.rows;
    for (int64_t t0 = 0; t0 < a.n_tok; t0 += kMatvecMaxCols) {
      const int64_t cols = std::min(kMatvecMaxCols, a.n_tok - t0);
      const MatvecPush push{.n_in = u32(w.n_in),
                            .n_out = u32(n_rows),
                            .w_row_bytes = u32(w.row_bytes),
                            .x_row_bytes = u32(static_cast<int64_t>(a.x_row_bytes)),
                            .y_stride = u32(a.y_stride),
                            .y_offset = u32(a.y_offset + first_row),
                            .n_cols = u32(cols),
                            .mat_bytes = 0, .mat_first = 0, .mat_count = 0, .n_pairs = 0,
                            .accumulate = a.accumulate ? 1u : 0u};
      const BufferRef x = a.xq.slice(static_cast<uint64_t>(t0) * a.x_row_bytes, a.xq.size - static_cast<uint64_t>(t0) * a.x_row_bytes);
      const uint64_t y_off = static_cast<uint64_t>(t0 * a.y_stride) * 4;
      const BufferRef y = a.y.slice(y_off, a.y.size - y_off);
      const Spec spec{shape.wg, shape.rows, u32(cols)};
      if (a.up) {
        RETURN_IF_ERROR(dev.stream().dispatch(shader, spec, {buf, x, y, x, x, buf_up}, push, detail::spread(dev, groups)));
      } else {
        RETURN_IF_ERROR(dev.stream().dispatch(shader, spec, {buf, x, y, x, x}, push, detail::spread(dev, groups)));
      }
    }
    dev.stream().count_weight_bytes(buf.size * (a.up ? 2 : 1));
  }
  return Status::ok();
}

Status matvec_id(Device& dev, const MatmulIdArgs& a) {
  if (a.n_pairs == 0) return Status::ok();
  const GpuMatrix& w = *a.w;
  if (w.n_mat < 2) return Status::bad_input("GPU expert products need a stack of matrices");
  RETURN_IF_ERROR(check_shape(w, a.up));
  const std::string shader =
      fmt::format("matvec_id{}_{}", a.up ? "_swiglu" : "", detail::lower(dtype_name(w.type)));
  const Shape shape = matvec_shape(dev, w.type, w.n_in);
  const int64_t groups = (w.n_out + shape.rows - 1) / shape.rows;
  const uint32_t max_z = dev.info().max_workgroup_count[2];
  for (size_t pi = 0; pi < w.parts.size(); ++pi) {
    const auto& part = w.parts[pi];
    for (int64_t z0 = 0; z0 < a.n_pairs; z0 += max_z) {
      const int64_t n = std::min<int64_t>(max_z, a.n_pairs - z0);
      const MatvecPush push{.n_in = u32(w.n_in),
                            .n_out = u32(w.n_out),
                            .w_row_bytes = u32(w.row_bytes),
                            .x_row_bytes = u32(static_cast<int64_t>(a.x_row_bytes)),
                            .y_stride = u32(a.y_stride),
                            .y_offset = 0,
                            .n_cols = 1,
                            .mat_bytes = u32(w.row_bytes * w.n_out),
                            .mat_first = u32(part.first),
                            .mat_count = u32(part.count),
                            .n_pairs = u32(n),
                            .accumulate = 0};
      const BufferRef ids = a.ids.slice(static_cast<uint64_t>(z0) * 4, static_cast<uint64_t>(n) * 4);
      const BufferRef rows = a.rows.slice(static_cast<uint64_t>(z0) * 4, static_cast<uint64_t>(n) * 4);
      const uint64_t y_off = static_cast<uint64_t>(z0 * a.y_stride) * 4;
      const BufferRef y = a.y.slice(y_off, a.y.size - y_off);
      Groups g = detail::spread(dev, groups);
      g.z = u32(n);
      const Spec spec{shape.wg, shape.rows, 1};
      if (a.up) {
        RETURN_IF_ERROR(dev.stream().dispatch(shader, spec, {part.buffer, a.xq, y, ids, rows, a.up->parts[pi].buffer},
                                              push, g));
      } else {
        RETURN_IF_ERROR(dev.stream().dispatch(shader, spec, {part.buffer, a.xq, y, ids, rows}, push, g));
      }
    }
  }
  dev.stream().count_weight_bytes(static_cast<uint64_t>(std::min(a.n_pairs, w.n_mat)) * w.row_bytes * w.n_out *
                                  (a.up ? 2 : 1));
  return Status::ok();
}

}  // namespace moetier::vk
