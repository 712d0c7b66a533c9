// The tiled prompt-batch products (shaders/matmat.comp) and the grouping of expert pairs
// (shaders/moe_group.comp).
#include <algorithm>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_ops_util.h"

namespace moetier::vk {

namespace {

using detail::u32;

constexpr int64_t kTileRows = 32, kTileTokens = 32;  // BM, BN of matmat.comp
constexpr int64_t kMaxGroupedExperts = 1024;        // moe_group.comp's shared counters

struct MatmatPush {
  uint32_t n_in, n_out, n_tok, w_row_bytes, x_row_bytes, y_stride, y_offset, mat_bytes, mat_first, mat_count, accumulate;
  uint32_t zero = 0;
};

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

Status check(const GpuMatrix& w) {
  const int64_t block = detail::gpu_block_elems(w.type);
  // One step is a superblock of 256 values (quantized) or 64 floats.
  const int64_t step = float_type(w.type) ? 64 : 256;
  if (block == 0) return Status::bad_input(fmt::format("the GPU backend has no mat-mat for {} weights", dtype_name(w.type)));
  if (w.n_in % step != 0) {
    return Status::bad_input(fmt::format("GPU mat-mat: rows of {} {} weights are not a multiple of {}", w.n_in,
                                         dtype_name(w.type), step));
  }
  return Status::ok();
}

std::string shader_name(const char* kind, DType t, bool int_dot) {
  return fmt::format("{}{}_{}", kind, int_dot && !float_type(t) ? "_idot" : "", detail::lower(dtype_name(t)));
}

}  // namespace

bool matmat_supports(const GpuMatrix& w) { return check(w).is_ok(); }

Status matmat(Device& dev, const MatmulArgs& a, bool int_dot) {
  if (a.n_tok == 0) return Status::ok();
  CHECK(a.up == nullptr);  // SwiGLU is fused in the mat-vec only
  const GpuMatrix& w = *a.w;
  RETURN_IF_ERROR(check(w));
  const std::string shader = shader_name("matmat", w.type, int_dot);
  for (const auto& part : w.parts) {
    int64_t first_row = 0, n_rows = 0;
    BufferRef buf = part.buffer;
    if (w.n_mat > 1) {
      if (a.mat < part.first || a.mat >= part.first + part.count) continue;
      const uint64_t mat_bytes = static_cast<uint64_t>(w.row_bytes * w.n_out);
      buf = part.buffer.slice(static_cast<uint64_t>(a.mat - part.first) * mat_bytes, mat_bytes);
      n_rows = w.n_out;
    } else {
      first_row = part.first;
      n_rows = part.count;
    }
    const MatmatPush push{.n_in = u32(w.n_in), .n_out = u32(n_rows), .n_tok = u32(a.n_tok),
                          .w_row_bytes = u32(w.row_bytes), .x_row_bytes = u32(static_cast<int64_t>(a.x_row_bytes)),
                          .y_stride = u32(a.y_stride), .y_offset = u32(a.y_offset + first_row),
                          .mat_bytes = 0, .mat_first = 0, .mat_count = 0, .accumulate = a.accumulate ? 1u : 0u};
    const Groups g{.x = u32((n_rows + kTileRows - 1) / kTileRows), .y = u32((a.n_tok + kTileTokens - 1) / kTileTokens)};
    if (g.x > dev.info().max_workgroup_count[0] || g.y > dev.info().max_workgroup_count[1]) {
      return Status::bad_input(fmt::format("GPU mat-mat: {} rows × {} tokens exceed the device's workgroup counts", n_rows, a.n_tok));
    }
    // Bindings 3-5 are the expert variant's; any buffer will do here.
    RETURN_IF_ERROR(dev.stream().dispatch(shader, {buf, a.xq, a.y, a.xq, a.xq, a.xq}, push, g));
    dev.stream().count_weight_bytes(buf.size);
  }
  return Status::ok();
}

Status moe_group(Device& dev, const BufferRef& ids, int64_t n_pairs, int64_t n_expert, const BufferRef& offsets,
                 const BufferRef& order) {
  if (n_expert > kMaxGroupedExperts) {
    return Status::bad_input(fmt::format("GPU expert grouping supports up to {} experts, not {}", kMaxGroupedExperts, n_expert));
  }
  CHECK(offsets.size >= static_cast<uint64_t>(n_expert + 1) * 4 && order.size >= static_cast<uint64_t>(n_pairs) * 4);
  const struct {
    uint32_t n_pairs, n_expert;
  } push{u32(n_pairs), u32(n_expert)};
  return dev.stream().dispatch("moe_group", {ids, offsets, order}, push, Groups{});
}

Status matmat_id(Device& dev, const MatmulIdArgs& a, bool int_dot) {
  if (a.n_pairs == 0) return Status::ok();
  CHECK(a.up == nullptr && a.group_offsets.valid() && a.group_order.valid() && a.n_rows_x > 0);
  const GpuMatrix& w = *a.w;
  if (w.n_mat < 2) return Status::bad_input("GPU expert products need a stack of matrices");
  RETURN_IF_ERROR(check(w));
  if (!a.grouped) RETURN_IF_ERROR(moe_group(dev, a.ids, a.n_pairs, w.n_mat, a.group_offsets, a.group_order));
  const std::string shader = shader_name("matmat_id", w.type, int_dot);
  // An expert gets at most one pair per token (a token picks an expert once).
  const Groups g{.x = u32((w.n_out + kTileRows - 1) / kTileRows),
                 .y = u32((a.n_rows_x + kTileTokens - 1) / kTileTokens),
                 .z = u32(w.n_mat)};
  if (g.x > dev.info().max_workgroup_count[0] || g.y > dev.info().max_workgroup_count[1] ||
      g.z > dev.info().max_workgroup_count[2]) {
    return Status::bad_input("GPU grouped expert products exceed the device's workgroup counts");
  }
  for (const auto& part : w.parts) {
    const MatmatPush push{.n_in = u32(w.n_in), .n_out = u32(w.n_out), .n_tok = 0,
                          .w_row_bytes = u32(w.row_bytes), .x_row_bytes = u32(static_cast<int64_t>(a.x_row_bytes)),
                          .y_stride = u32(a.y_stride), .y_offset = 0, .mat_bytes = u32(w.row_bytes * w.n_out),
                          .mat_first = u32(part.first), .mat_count = u32(part.count), .accumulate = 0};
    RETURN_IF_ERROR(dev.stream().dispatch(shader, {part.buffer, a.xq, a.y, a.rows, a.group_offsets, a.group_order}, push, g));
  }
  dev.stream().count_weight_bytes(static_cast<uint64_t>(std::min(a.n_pairs, w.n_mat)) * w.row_bytes * w.n_out);
  return Status::ok();
}

}  // namespace moetier::vk
