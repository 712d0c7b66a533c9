#include <algorithm>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_ops_util.h"

namespace moetier::vk {

namespace {

constexpr uint32_t kThreads = 64;  // local_size_x of every shader

Groups spread(const Device& dev, uint64_t n_groups) {
  const uint32_t max_x = dev.info().max_workgroup_count[0];
  n_groups = std::max<uint64_t>(n_groups, 1);
  if (n_groups <= max_x) return {.x = static_cast<uint32_t>(n_groups)};
  return {.x = max_x, .y = static_cast<uint32_t>((n_groups + max_x - 1) / max_x)};
}

Groups per_invocation(const Device& dev, uint64_t n) { return spread(dev, (n + kThreads - 1) / kThreads); }

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

struct NormPush {
  uint32_t n, n_heads, head_stride, row_stride, out_head_stride, out_row_stride, n_vectors;
  float eps;
  uint32_t has_weight;
  uint32_t quant = 0, q8k_stride = 0, q80_stride = 0;  // rms_norm_quant only
};

NormPush norm_push(const NormShape& s, bool weight) {
  return {.n = u32(s.n), .n_heads = u32(s.n_heads), .head_stride = u32(s.head_stride), .row_stride = u32(s.row_stride),
          .out_head_stride = u32(s.out_head_stride), .out_row_stride = u32(s.out_row_stride),
          .n_vectors = u32(s.n_rows * s.n_heads), .eps = s.eps, .has_weight = weight ? 1u : 0u};
}

struct EwPush {
  uint32_t n, n_rows, a_stride, b_stride, out_stride, a_offset, b_offset, out_offset;
};

}  // namespace

Status rms_norm(Device& dev, const NormShape& s, const BufferRef& x, const BufferRef& w, const BufferRef& out,
                const NormQuantOut& quant) {
  if (s.n_rows == 0) return Status::ok();
  const bool weight = w.valid();
  if (quant.q8_k.valid() || quant.q8_0.valid()) {
    if (s.n_heads != 1 || (quant.q8_k.valid() && s.n % 256 != 0) || (quant.q8_0.valid() && (s.n % 32 != 0 || s.n / 32 > 2048))) {
      return Status::bad_input(fmt::format("GPU norm + conversion: vectors of {} ({} per row) are not supported", s.n, s.n_heads));
    }
    CHECK(s.out_row_stride == s.n);  // the conversions read the rows back as written
    NormPush push = norm_push(s, weight);
    push.quant = (quant.q8_k.valid() ? 1u : 0u) | (quant.q8_0.valid() ? 2u : 0u);
    push.q8k_stride = u32(static_cast<int64_t>(quant.q8_k_stride));
    push.q80_stride = u32(static_cast<int64_t>(quant.q8_0_stride));
    return dev.stream().dispatch("rms_norm_quant",
                                 {x, weight ? w : x, out, quant.q8_k.valid() ? quant.q8_k : out,
                                  quant.q8_0.valid() ? quant.q8_0 : out},
                                 push, spread(dev, static_cast<uint64_t>(s.n_rows)));
  }
  return dev.stream().dispatch("rms_norm", {x, weight ? w : x, out}, norm_push(s, weight),
                               spread(dev, static_cast<uint64_t>(s.n_rows * s.n_heads)));
}

Status l2_norm(Device& dev, const NormShape& s, const BufferRef& x, const BufferRef& out) {
  if (s.n_rows == 0) return Status::ok();
  return dev.stream().dispatch("l2_norm", {x, x, out}, norm_push(s, false),
                               spread(dev, static_cast<uint64_t>(s.n_rows * s.n_heads)));
}

Status rope_neox(Device& dev, const BufferRef& x, int64_t n_rows, int64_t n_heads, int64_t head_stride,
                 int64_t row_stride, int64_t n_rot, const BufferRef& cos_sin) {
  if (n_rows == 0 || n_rot == 0) return Status::ok();
  const struct {
    uint32_t n_rows, n_heads, head_stride, row_stride, n_rot;
  } push{u32(n_rows), u32(n_heads), u32(head_stride), u32(row_stride), u32(n_rot)};
  return dev.stream().dispatch("rope_neox", {x, cos_sin}, push,
                               per_invocation(dev, static_cast<uint64_t>(n_rows * n_heads * (n_rot / 2))));
}

Status add(Device& dev, const RowsView& a, const RowsView& b, int64_t n, int64_t n_rows) {
  if (n_rows == 0) return Status::ok();
  const EwPush push{u32(n), u32(n_rows), u32(a.stride), u32(b.stride), 0, u32(a.offset), u32(b.offset), 0};
  return dev.stream().dispatch("add", {a.buffer, b.buffer, a.buffer}, push,
                               per_invocation(dev, static_cast<uint64_t>(n * n_rows)));
}

Status silu_mul(Device& dev, const RowsView& gate, const RowsView& up, const RowsView& out, int64_t n, int64_t n_rows) {
  if (n_rows == 0) return Status::ok();
  const EwPush push{u32(n),          u32(n_rows),      u32(gate.stride), u32(up.stride), u32(out.stride),
                    u32(gate.offset), u32(up.offset), u32(out.offset)};
  return dev.stream().dispatch("silu_mul", {gate.buffer, up.buffer, out.buffer}, push,
                               per_invocation(dev, static_cast<uint64_t>(n * n_rows)));
}

Status kv_store(Device& dev, const RowsView& src, int64_t n_rows, int64_t width, const BufferRef& cache,
                int64_t first_row, DType type) {
  if (n_rows == 0) return Status::ok();
  ASSIGN_OR_RETURN(const uint32_t code, detail::cache_type_code(type));
  const int64_t row_bytes = dtype_row_bytes(type, width);
  if (row_bytes % 4 != 0 || (code >= 2 && width / 32 > 512)) {
    return Status::bad_input(fmt::format("GPU KV cache rows of {} {} elements are not supported", width, dtype_name(type)));
  }
  const struct {
    uint32_t n_rows, width, src_stride, dst_first_row, type, src_offset, row_bytes;
  } push{u32(n_rows), u32(width), u32(src.stride), u32(first_row), code, u32(src.offset), u32(row_bytes)};
  const Groups groups = code >= 2 ? spread(dev, static_cast<uint64_t>(n_rows))
                                  : per_invocation(dev, static_cast<uint64_t>(n_rows * (code == 1 ? width / 2 : width)));
  return dev.stream().dispatch("kv_store", {src.buffer, cache}, push, groups);
}

Status attention(Device& dev, const AttentionDispatch& a, const BufferRef& q, const BufferRef& k_cache,
                 const BufferRef& v_cache, const BufferRef& scores, const BufferRef& out, const BufferRef& gate) {
  const int64_t max_keys = a.pos0 + a.n_rows;
  const int64_t per_row = a.n_head * max_keys * 4;  // bytes of scores per query row
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(scores.size) / per_row);
  if (static_cast<int64_t>(scores.size) < per_row) {
    return Status::runtime(fmt::format("the attention scratch ({} bytes) is too small for {} keys", scores.size, max_keys));
  }
  for (int64_t r0 = 0; r0 < a.n_rows; r0 += chunk) {
    const int64_t rows = std::min(chunk, a.n_rows - r0);
    ASSIGN_OR_RETURN(const uint32_t k_code, detail::cache_type_code(a.k_type));
    ASSIGN_OR_RETURN(const uint32_t v_code, detail::cache_type_code(a.v_type));
    const struct {
      uint32_t hd, n_head, n_head_kv, n_rows, pos0, max_keys;
      float scale;
      uint32_t k_type, v_type, k_row_bytes, v_row_bytes;
      uint32_t has_gate, gate_row_stride, gate_head_stride, gate_offset, row_base;
    } push{u32(a.hd),
           u32(a.n_head),
           u32(a.n_head_kv),
           u32(rows),
           u32(a.pos0 + r0),
           u32(max_keys),
           a.scale,
           k_code,
           v_code,
           u32(dtype_row_bytes(a.k_type, a.n_head_kv * a.hd)),
           u32(dtype_row_bytes(a.v_type, a.n_head_kv * a.hd)),
           a.has_gate ? 1u : 0u,
           u32(a.gate_row_stride),
           u32(a.gate_head_stride),
           u32(a.gate_offset),
           u32(a.row_base + r0)};
    RETURN_IF_ERROR(dev.stream().dispatch("attention", {q, k_cache, v_cache, scores, out, gate.valid() ? gate : q}, push,
                                          spread(dev, static_cast<uint64_t>(rows * a.n_head))));
  }
  return Status::ok();
}

Status ssm_conv(Device& dev, const ConvDispatch& c, const BufferRef& qkv, const BufferRef& weights,
                const BufferRef& state, const BufferRef& out) {
  if (c.n_rows == 0) return Status::ok();
  if (c.taps < 2 || c.taps > 9) return Status::bad_input(fmt::format("GPU conv supports 2..9 taps, not {}", c.taps));
  const struct {
    uint32_t n_rows, channels, taps, row_begin;
  } push{u32(c.n_rows), u32(c.channels), u32(c.taps), u32(c.row_begin)};
  return dev.stream().dispatch("ssm_conv", {qkv, weights, state, out}, push,
                               per_invocation(dev, static_cast<uint64_t>(c.channels)));
}

Status delta_rule(Device& dev, const DeltaRuleDispatch& d, const BufferRef& conv_out, const BufferRef& beta,
                  const BufferRef& alpha, const BufferRef& params, const BufferRef& state, const BufferRef& z,
                  const BufferRef& y) {
  if (d.n_rows == 0) return Status::ok();
  if (d.dk > 256 || d.dv > 256) return Status::bad_input("GPU delta rule supports state dims up to 256");
  const struct {
    uint32_t n_rows, row_begin, dk, dv, n_k_heads, n_v_heads, channels, key_dim, value_dim;
    float q_scale, eps;
  } push{u32(d.n_rows),    u32(d.row_begin), u32(d.dk),      u32(d.dv),        u32(d.n_k_heads), u32(d.n_v_heads),
         u32(d.channels), u32(d.key_dim),   u32(d.value_dim), d.q_scale,       d.eps};
  // The state stays in its buffer between dispatches, so the rows can go in chunks that keep
  // each invocation within the loop budget (vk_ops.h): per row, the q/k load, the two passes
  // over d_k for each of its columns, the norm's reduction steps and the output loop.
  const int64_t cols = (d.dv + 63) / 64;
  const int64_t per_row = (d.dk + 63) / 64 + cols * (2 * d.dk + 2) + 6 + cols + 1;
  const int64_t chunk = std::max<int64_t>(1, kLoopBudget / per_row);
  for (int64_t r0 = 0; r0 < d.n_rows; r0 += chunk) {
    auto part = push;
    part.n_rows = u32(std::min(chunk, d.n_rows - r0));
    part.row_begin = u32(d.row_begin + r0);
    RETURN_IF_ERROR(dev.stream().dispatch("delta_rule", {conv_out, beta, alpha, params, state, z, y}, part,
                                          Groups{.x = u32(d.n_v_heads)}));
  }
  return Status::ok();
}

Status moe_router(Device& dev, KernelSet kernels, const BufferRef& logits, int64_t n_expert, int64_t k, int64_t n_rows,
                  const BufferRef& ids, const BufferRef& weights, const BufferRef& rows) {
  if (n_rows == 0) return Status::ok();
  if (k > 16) return Status::bad_input("GPU routing supports up to 16 experts per token");
  const struct {
    uint32_t n_expert, k, n_rows;
  } push{u32(n_expert), u32(k), u32(n_rows)};
  // The fast router keeps each invocation's experts in registers: at most 16 × 64 of them.
  const bool fast = kernels == KernelSet::kFast && n_expert <= 1024;
  return dev.stream().dispatch(fast ? "moe_router_fast" : "moe_router", {logits, ids, weights, rows}, push,
                               spread(dev, static_cast<uint64_t>(n_rows)));
}

Status moe_combine(Device& dev, const MoeCombineArgs& a) {
  if (a.n_rows == 0) return Status::ok();
  const struct {
    uint32_t n_embd, k, n_rows, has_shared, has_routed, add_residual, use_map;
  } push{u32(a.n_embd), u32(a.k), u32(a.n_rows), a.has_shared ? 1u : 0u, a.has_routed ? 1u : 0u,
         a.residual.valid() ? 1u : 0u, a.pair_map.valid() ? 1u : 0u};
  const auto or_out = [&](const BufferRef& b) { return b.valid() ? b : a.out; };
  return dev.stream().dispatch("moe_combine",
                               {or_out(a.experts), or_out(a.weights), or_out(a.shared), or_out(a.shared_gate), a.out,
                                or_out(a.residual), or_out(a.pair_map)},
                               push, per_invocation(dev, static_cast<uint64_t>(a.n_embd * a.n_rows)));
}

}  // namespace moetier::vk
