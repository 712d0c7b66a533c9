#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"

namespace moetier::vk {

namespace {

struct MatmulPush {
  uint32_t n_in, n_out, w_row_bytes, x_row_bytes, y_stride, y_offset, rows_per_group, mat_bytes, n_pairs;
  uint32_t mat_first, mat_count;
};

constexpr int64_t kSharedValues = 2048;  // matmul.comp's s_val

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<int64_t> block_elems(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0: return 32;
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: return 256;
    default: return Status::bad_input(fmt::format("the GPU backend has no matmul for {} weights", dtype_name(t)));
  }
}

// Groups for `n` items: x up to the device limit, the rest in y.
Groups spread(const Device& dev, int64_t n, uint32_t z) {
  const uint32_t max_x = dev.info().max_workgroup_count[0];
  const uint64_t count = static_cast<uint64_t>(std::max<int64_t>(n, 1));
  if (count <= max_x) return {.x = static_cast<uint32_t>(count), .y = 1, .z = z};
  return {.x = max_x, .y = static_cast<uint32_t>((count + max_x - 1) / max_x), .z = z};
}

}  // namespace

Result<DType> gpu_activation_type(DType w) {
  switch (w) {
    case DType::F32: return DType::F32;
    case DType::F16: return DType::F16;
    case DType::BF16: return DType::BF16;
    case DType::Q4_0: case DType::Q8_0: return DType::Q8_0;
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: return DType::Q8_K;
    default: return Status::bad_input(fmt::format("the GPU backend cannot compute with {} weights", dtype_name(w)));
  }
}

Status quantize_rows(Device& dev, DType type, const BufferRef& x, int64_t n_rows, int64_t n_in, int64_t x_stride,
                     const BufferRef& out) {
  if (n_rows == 0) return Status::ok();
  const uint64_t out_stride = gpu_activation_row_bytes(type, n_in);
  CHECK(out.size >= out_stride * static_cast<uint64_t>(n_rows));
  if (type == DType::F32) {
    // Plain copy row by row (strides may differ).
    for (int64_t r = 0; r < n_rows; ++r) {
      dev.stream().copy(x.slice(static_cast<uint64_t>(r * x_stride) * 4, static_cast<uint64_t>(n_in) * 4),
                        out.slice(static_cast<uint64_t>(r) * out_stride, out_stride), static_cast<uint64_t>(n_in) * 4);
    }
    return Status::ok();
  }
  const char* shader = nullptr;
  switch (type) {
    case DType::Q8_K: shader = "quantize_q8_k"; break;
    case DType::Q8_0: shader = "quantize_q8_0"; break;
    case DType::F16: shader = "quantize_f16"; break;
    case DType::BF16: shader = "quantize_bf16"; break;
    default: return Status::bad_input(fmt::format("no GPU conversion to {}", dtype_name(type)));
  }
  if (type == DType::Q8_0 && n_in / 32 > 2048) return Status::bad_input("rows too long for GPU Q8_0 conversion");
  const struct {
    uint32_t n_in, n_rows, x_stride, y_stride;
  } push{static_cast<uint32_t>(n_in), static_cast<uint32_t>(n_rows), static_cast<uint32_t>(x_stride),
         static_cast<uint32_t>(out_stride)};
  return dev.stream().dispatch(shader, {x, out}, push, spread(dev, n_rows, 1));
}

const char* kernel_set_name(KernelSet k) { return k == KernelSet::kFast ? "fast" : "exact"; }

// Decode-sized work (up to kMatvecMaxCols tokens, or pairs) is bandwidth-bound: mat-vec.
// Prompt batches reuse each weight tile across 32 tokens: mat-mat.
Status matmul(Device& dev, KernelSet k, const MatmulArgs& a) {
  if (k == KernelSet::kExact) return matmul_exact(dev, a);
  if (a.n_tok <= kMatvecMaxCols || a.up || !matmat_supports(*a.w)) return matvec(dev, a);
  return matmat(dev, a, dev.info().integer_dot_accelerated);
}

Status matmul_id(Device& dev, KernelSet k, const MatmulIdArgs& a) {
  if (k == KernelSet::kExact) return matmul_id_exact(dev, a);
  if (a.n_pairs <= kMatvecMaxCols || a.up || !a.group_offsets.valid() || !matmat_supports(*a.w)) {
    return matvec_id(dev, a);
  }
  return matmat_id(dev, a, dev.info().integer_dot_accelerated);
}

Status matmul_exact(Device& dev, const MatmulArgs& a) {
  CHECK(!a.accumulate && a.up == nullptr);  // the exact kernels do not fuse
  const GpuMatrix& w = *a.w;
  const int64_t mat = a.mat, n_tok = a.n_tok, y_stride = a.y_stride, y_offset = a.y_offset;
  const BufferRef& xq = a.xq;
  const BufferRef& y = a.y;
  const uint64_t x_row_bytes = a.x_row_bytes;
  if (n_tok == 0) return Status::ok();
  ASSIGN_OR_RETURN(int64_t block, block_elems(w.type));
  const int64_t nb = w.n_in / block;
  if (nb > kSharedValues) return Status::bad_input(fmt::format("GPU matmul rows of {} elements are too long", w.n_in));
  const int64_t rows_per_group = std::clamp<int64_t>(kSharedValues / nb, 1, 64);
  const std::string shader = "matmul_" + lower(dtype_name(w.type));
  for (const auto& part : w.parts) {
    // 2-D: this part's rows; stack: the part holding matrix `mat`.
    int64_t first_row = 0, n_rows = 0;
    BufferRef buf = part.buffer;
    if (w.n_mat > 1) {
      if (mat < part.first || mat >= part.first + part.count) continue;
      const uint64_t mat_bytes = static_cast<uint64_t>(w.row_bytes * w.n_out);
      buf = part.buffer.slice(static_cast<uint64_t>(mat - part.first) * mat_bytes, mat_bytes);
      n_rows = w.n_out;
    } else {
      first_row = part.first;
      n_rows = part.count;
    }
    const MatmulPush push{.n_in = static_cast<uint32_t>(w.n_in),
                          .n_out = static_cast<uint32_t>(n_rows),
                          .w_row_bytes = static_cast<uint32_t>(w.row_bytes),
                          .x_row_bytes = static_cast<uint32_t>(x_row_bytes),
                          .y_stride = static_cast<uint32_t>(y_stride),
                          .y_offset = static_cast<uint32_t>(y_offset + first_row),
                          .rows_per_group = static_cast<uint32_t>(rows_per_group),
                          .mat_bytes = 0,
                          .n_pairs = 0,
                          .mat_first = 0,
                          .mat_count = 0};
    const int64_t groups = (n_rows + rows_per_group - 1) / rows_per_group;
    RETURN_IF_ERROR(dev.stream().dispatch(shader, {buf, xq, y}, push, spread(dev, groups, static_cast<uint32_t>(n_tok))));
    dev.stream().count_weight_bytes(buf.size);
  }
  return Status::ok();
}

Status matmul_id_exact(Device& dev, const MatmulIdArgs& a) {
  CHECK(a.up == nullptr);
  const GpuMatrix& w = *a.w;
  const BufferRef &xq = a.xq, &ids = a.ids, &rows = a.rows, &y = a.y;
  const uint64_t x_row_bytes = a.x_row_bytes;
  const int64_t n_pairs = a.n_pairs, y_stride = a.y_stride;
  if (n_pairs == 0) return Status::ok();
  if (w.n_mat < 2) return Status::bad_input("GPU expert products need a stack of matrices");
  ASSIGN_OR_RETURN(int64_t block, block_elems(w.type));
  const int64_t nb = w.n_in / block;
  if (nb > kSharedValues) return Status::bad_input(fmt::format("GPU matmul rows of {} elements are too long", w.n_in));
  const int64_t rows_per_group = std::clamp<int64_t>(kSharedValues / nb, 1, 64);
  const int64_t groups = (w.n_out + rows_per_group - 1) / rows_per_group;
  const std::string shader = "matmul_id_" + lower(dtype_name(w.type));
  for (const auto& part : w.parts) {
    const MatmulPush push{.n_in = static_cast<uint32_t>(w.n_in),
                          .n_out = static_cast<uint32_t>(w.n_out),
                          .w_row_bytes = static_cast<uint32_t>(w.row_bytes),
                          .x_row_bytes = static_cast<uint32_t>(x_row_bytes),
                          .y_stride = static_cast<uint32_t>(y_stride),
                          .y_offset = 0,
                          .rows_per_group = static_cast<uint32_t>(rows_per_group),
                          .mat_bytes = static_cast<uint32_t>(w.row_bytes * w.n_out),
                          .n_pairs = static_cast<uint32_t>(n_pairs),
                          .mat_first = static_cast<uint32_t>(part.first),
                          .mat_count = static_cast<uint32_t>(part.count)};
    RETURN_IF_ERROR(dev.stream().dispatch(shader, {part.buffer, xq, y, ids, rows}, push,
                                          spread(dev, groups, static_cast<uint32_t>(n_pairs))));
  }
  // Each pair reads one matrix: at most min(pairs, matrices) distinct ones.
  dev.stream().count_weight_bytes(static_cast<uint64_t>(std::min(n_pairs, w.n_mat)) * w.row_bytes * w.n_out);
  return Status::ok();
}

}  // namespace moetier::vk
