// flash_attention(): the launcher of shaders/flash_attention.comp (design there) and of its
// split-K merge, shaders/flash_attention_reduce.comp. The plan below picks, per dispatch,
// the specialization constants (workgroup size, lanes per query vector, keys per tile,
// cache types) and how the keys are cut into chunks.
#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_ops_util.h"
#include "gpu/vulkan/vk_tuning.h"

namespace moetier::vk {

namespace {

constexpr uint32_t kReduceThreads = 64;  // the reduce's workgroup size
constexpr double kLog2e = 1.4426950408889634;

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What one dispatch of `n_rows` query rows against up to `n_keys` keys needs.
struct FlashShape {
  int64_t hd = 0, n_head = 0, n_head_kv = 0, n_rows = 0, n_keys = 0;
};

struct FlashPlan {
  uint32_t workgroup_size = 0;   // spec constant 0
  uint32_t lanes = 0;            // spec constant 2: lanes per query vector
  uint32_t tile_keys = 0;        // spec constant 3
  int64_t n_blocks = 0;          // workgroups along the query vectors, per KV head
  int64_t chunk_keys = 0;        // keys per split-K chunk, a multiple of tile_keys
  int64_t n_chunks = 0;          // 1: no split, the main dispatch writes the output
  // At least n_chunks, and at least the chunks of any dispatch of as many rows and fewer
  // keys (n_chunks itself is not monotonic in the keys: chunks round up to whole tiles).
  int64_t max_chunks = 0;
  uint64_t partial_o_bytes = 0;  // [n_chunks][row][n_head][hd] f32, when splitting
  uint64_t partial_ml_bytes = 0; // [n_chunks][row][n_head] (m, l), when splitting
  uint64_t bytes_per_chunk = 0;  // partials of one chunk: rows · n_head · (hd + 2) floats
  uint64_t scratch_bytes() const { return partial_o_bytes + partial_ml_bytes; }
  // Partials enough for this plan and for any with as many rows and fewer keys.
  uint64_t scratch_bound() const { return max_chunks > 1 ? static_cast<uint64_t>(max_chunks) * bytes_per_chunk : 0; }
};

Status check_shape(const DeviceInfo& info, int64_t hd, int64_t n_head, int64_t n_head_kv) {
  if (!info.fast_kernels_supported()) {
    return Status::bad_input(fmt::format("flash attention needs subgroup operations this device lacks ({})", info.name));
  }
  if (hd != 64 && hd != 128 && hd != 256) {
    return Status::bad_input(fmt::format("flash attention supports head dims 64, 128 and 256, not {}", hd));
  }
  if (n_head_kv <= 0 || n_head <= 0 || n_head % n_head_kv != 0) {
    return Status::bad_input(fmt::format("flash attention needs n_head ({}) a multiple of n_head_kv ({})", n_head, n_head_kv));
  }
  return Status::ok();
}

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Defaults (the numbers per vendor: vk_tuning.h):
//  * lanes: hd / 16 (16 dims, 4 vec4s of q and of o per lane), at least 8 (hd 64: 8 dims
//    per lane, so small heads still spread over enough invocations), at most the subgroup;
//  * tiles of 16 keys, halved until the K and V tiles fit the shared memory (hd 256 and 16
//    keys: 32 KiB); 4 on lavapipe, where every pipeline is compiled by LLVM with its tile
//    loops unrolled (16 keys at hd 256: ~3 s per pipeline) and speed does not matter;
//  * workgroups of 256 invocations for prompts (128 on lavapipe, whose invocations are SIMD
//    lanes of 2 CPU cores), one row's query vectors for decode;
//  * split-K until ~256 workgroups (about 2 per compute unit of a large GPU: 132 SMs on an
//    H100/H200, 96 CUs on a Radeon 7900; smaller GPUs just run more waves), but no chunk
//    under 128 keys, so a chunk's partials (hd + 2 floats per query) stay small next to its
//    K/V reads (128 · 2 · hd elements per KV head).
Result<FlashPlan> plan_flash(const DeviceInfo& info, const FlashShape& s, const FlashAttentionTuning& t) {
  RETURN_IF_ERROR(check_shape(info, s.hd, s.n_head, s.n_head_kv));
  CHECK(s.n_rows > 0 && s.n_keys >= s.n_rows);
  // A query's lanes must sit in one subgroup of the smallest size the device may run (Intel
  // may compile 8-, 16- or 32-wide); workgroups are whole subgroups of the largest.
  const uint32_t subgroup = info.min_subgroup_size ? std::min(info.subgroup_size, info.min_subgroup_size) : info.subgroup_size;
  const uint32_t subgroup_max = std::max(info.max_subgroup_size, info.subgroup_size);
  FlashPlan plan;

  plan.lanes = t.lanes ? t.lanes : std::clamp<uint32_t>(u32(s.hd / 16), 8, subgroup);
  if (!power_of_two(plan.lanes) || plan.lanes < 4 || plan.lanes > subgroup || plan.lanes > s.hd / 4) {
    return Status::bad_input(fmt::format("flash attention: {} lanes per query do not fit subgroups of {} and head dim {}",
                                         plan.lanes, subgroup, s.hd));
  }
  const uint64_t tile_bytes_per_key = 2 * static_cast<uint64_t>(s.hd) * 4;  // one key of K and V in f32
  const VendorDefaults& defaults = vendor_defaults(info);
  plan.tile_keys = t.tile_keys ? t.tile_keys : defaults.flash_tile_keys;
  const uint64_t shared = info.subgroup_kernel_shared_bytes();
  while (!t.tile_keys && plan.tile_keys > 4 && plan.tile_keys * tile_bytes_per_key > shared) plan.tile_keys /= 2;
  if (!power_of_two(plan.tile_keys) || plan.tile_keys < 4 || plan.tile_keys > 64 ||
      plan.tile_keys * tile_bytes_per_key > shared) {
    return Status::bad_input(fmt::format("flash attention: tiles of {} keys of head dim {} do not fit {} bytes of shared memory",
                                         plan.tile_keys, s.hd, shared));
  }

  // Workgroup: whole rows of query vectors (group · lanes invocations each), as many rows as
  // the target size holds (at least one, at most the dispatch's), rounded up to whole
  // subgroups; capped by the device, in which case a workgroup holds part of a row's heads.
  const int64_t group = s.n_head / s.n_head_kv;
  const uint32_t target_size = t.workgroup_size ? t.workgroup_size : defaults.flash_workgroup_size;
  const int64_t per_row = group * plan.lanes;
  const int64_t rows_per_block = std::clamp<int64_t>(target_size / per_row, 1, s.n_rows);
  const int64_t max_size = (std::min<int64_t>(info.max_workgroup_invocations, 1024) / subgroup_max) * subgroup_max;
  int64_t size = ceil_div(rows_per_block * per_row, subgroup_max) * subgroup_max;
  size = std::min(size, max_size);
  CHECK(size >= plan.lanes && size % plan.lanes == 0);
  plan.workgroup_size = u32(size);
  const int64_t queries = size / plan.lanes;
  plan.n_blocks = ceil_div(s.n_rows * group, queries);

  // Split-K: enough chunks for the target workgroup count, no chunk below the minimum, none
  // above the tuning cap or (lavapipe) the loop budget.
  const int64_t tile = plan.tile_keys;
  const int64_t base_groups = plan.n_blocks * s.n_head_kv;
  const int64_t target_groups = t.target_workgroups ? t.target_workgroups : defaults.flash_target_workgroups;
  const int64_t min_chunk = std::max<int64_t>(t.min_chunk_keys ? t.min_chunk_keys : defaults.flash_min_chunk_keys, tile);
  const int64_t wanted = std::clamp<int64_t>(ceil_div(target_groups, base_groups), 1, ceil_div(s.n_keys, min_chunk));
  int64_t cap = INT64_MAX;  // keys per chunk at most, whatever the number of keys
  if (t.max_chunk_keys > 0) cap = std::max<int64_t>(tile, t.max_chunk_keys / tile * tile);
  if (info.loop_limited) {
    // The shader's loop iterations per tile when nothing is unrolled: the tile loop, the
    // load steps, the rescale, and per key the dot product (outer + per vec4), the
    // butterfly (outer + log2 lanes), the mask/max and the accumulation (outer + per vec4);
    // plus the query load and the output write once.
    const int64_t per_lane = s.hd / 4 / plan.lanes;
    const int64_t load_steps = ceil_div(tile * s.hd / 4, size);
    const int64_t per_tile = 1 + load_steps + per_lane + tile * (4 + 2 * per_lane + std::countr_zero(plan.lanes));
    const int64_t max_tiles = (kLoopBudget - 2 * per_lane) / per_tile;
    CHECK(max_tiles >= 1);
    cap = std::min(cap, max_tiles * tile);
  }
  plan.chunk_keys = std::min(cap, ceil_div(ceil_div(s.n_keys, wanted), tile) * tile);
  plan.n_chunks = ceil_div(s.n_keys, plan.chunk_keys);
  // n_chunks ≤ wanted without the cap (chunks only round up), = ⌈n_keys / cap⌉ with it; both
  // bounds grow with n_keys.
  plan.max_chunks = std::max(wanted, cap == INT64_MAX ? 1 : ceil_div(s.n_keys, cap));
  CHECK(plan.n_chunks <= plan.max_chunks);
  const uint64_t slots_per_chunk = static_cast<uint64_t>(s.n_rows * s.n_head);
  plan.bytes_per_chunk = slots_per_chunk * static_cast<uint64_t>(s.hd + 2) * 4;
  if (plan.n_chunks > 1) {
    const uint64_t slots = static_cast<uint64_t>(plan.n_chunks) * slots_per_chunk;
    plan.partial_o_bytes = slots * static_cast<uint64_t>(s.hd) * 4;  // a multiple of 256: ml's offset stays aligned
    plan.partial_ml_bytes = slots * 8;
  }
  return plan;
}

// The plan of a dispatch of `rows` rows when the call's last row sees `n_keys` keys. Every
// piece of a call is planned with the call's n_keys and dispatches ⌈its keys / chunk_keys⌉
// chunks, never more than the plan's, so its partials fit what the plan says.
Result<FlashPlan> plan_rows(const DeviceInfo& info, const FlashShape& whole, int64_t rows, const FlashAttentionTuning& t) {
  return plan_flash(info, {.hd = whole.hd, .n_head = whole.n_head, .n_head_kv = whole.n_head_kv, .n_rows = rows,
                           .n_keys = whole.n_keys}, t);
}

bool fits_device(const DeviceInfo& info, const FlashPlan& plan) {
  return plan.n_blocks <= info.max_workgroup_count[0] && plan.max_chunks <= info.max_workgroup_count[2];
}

// The largest number of rows per dispatch such that the plans of that many rows and of every
// smaller number (the last piece) fit the device's workgroup counts and, with their scratch
// bound, `scratch` bytes of partials (0: not even one row fits); and the largest bound.
struct RowPieces {
  int64_t rows = 0;
  uint64_t max_scratch = 0;
};
Result<RowPieces> fit_rows(const DeviceInfo& info, const FlashShape& whole, uint64_t scratch, const FlashAttentionTuning& t) {
  RowPieces best;
  for (int64_t r = 1; r <= whole.n_rows; ++r) {
    ASSIGN_OR_RETURN(const FlashPlan plan, plan_rows(info, whole, r, t));
    if (!fits_device(info, plan) || plan.scratch_bound() > scratch) break;
    best.rows = r;
    best.max_scratch = std::max(best.max_scratch, plan.scratch_bound());
  }
  return best;
}

}  // namespace

Result<uint64_t> flash_attention_scratch_bytes(const DeviceInfo& info, int64_t n_rows, int64_t n_head,
                                               int64_t n_head_kv, int64_t max_keys, int64_t hd,
                                               const FlashAttentionTuning& tuning) {
  RETURN_IF_ERROR(check_shape(info, hd, n_head, n_head_kv));
  if (n_rows <= 0 || max_keys < n_rows) return Status::bad_input("flash attention: need 1 ≤ n_rows ≤ max_keys");
  ASSIGN_OR_RETURN(const RowPieces fit, fit_rows(info, {.hd = hd, .n_head = n_head, .n_head_kv = n_head_kv,
                                                         .n_rows = n_rows, .n_keys = max_keys},
                                                 UINT64_MAX, tuning));
  if (fit.rows < n_rows) {
    return Status::bad_input(fmt::format("flash attention: {} rows are beyond the device's workgroup counts", n_rows));
  }
  return fit.max_scratch;
}

Status flash_attention(Device& dev, const AttentionDispatch& a, const BufferRef& q, const BufferRef& k_cache,
                       const BufferRef& v_cache, const BufferRef& partials, const BufferRef& out, const BufferRef& gate,
                       const FlashAttentionTuning& tuning) {
  const DeviceInfo& info = dev.info();
  RETURN_IF_ERROR(check_shape(info, a.hd, a.n_head, a.n_head_kv));
  ASSIGN_OR_RETURN(const uint32_t k_code, detail::cache_type_code(a.k_type));
  ASSIGN_OR_RETURN(const uint32_t v_code, detail::cache_type_code(a.v_type));
  if (a.n_rows == 0) return Status::ok();
  if (a.n_rows < 0 || a.pos0 < 0 || a.row_base < 0) return Status::bad_input("flash attention: negative rows or positions");
  if (a.has_gate && !gate.valid()) return Status::bad_input("flash attention: a gated dispatch without a gate buffer");
  const int64_t n_keys = a.pos0 + a.n_rows;
  const int64_t k_row_bytes = dtype_row_bytes(a.k_type, a.n_head_kv * a.hd);
  const int64_t v_row_bytes = dtype_row_bytes(a.v_type, a.n_head_kv * a.hd);
  if (static_cast<uint64_t>(n_keys) * static_cast<uint64_t>(std::max(k_row_bytes, v_row_bytes)) > UINT32_MAX) {
    return Status::bad_input(fmt::format("flash attention: {} keys of {} bytes are beyond 32-bit offsets", n_keys,
                                         std::max(k_row_bytes, v_row_bytes)));
  }
  const FlashShape whole{.hd = a.hd, .n_head = a.n_head, .n_head_kv = a.n_head_kv, .n_rows = a.n_rows, .n_keys = n_keys};
  const uint64_t scratch = partials.valid() ? partials.size : 0;
  // All rows in one piece when their plan fits, else the most rows whose plans all fit.
  ASSIGN_OR_RETURN(const FlashPlan all_rows, plan_rows(info, whole, a.n_rows, tuning));
  int64_t piece_rows = a.n_rows;
  if (!fits_device(info, all_rows) || all_rows.scratch_bytes() > scratch) {
    ASSIGN_OR_RETURN(const RowPieces fit, fit_rows(info, whole, scratch, tuning));
    if (fit.rows == 0) {
      ASSIGN_OR_RETURN(const FlashPlan one, plan_rows(info, whole, 1, tuning));
      return Status::runtime(fmt::format("the flash-attention partials ({} bytes) are too small for {} keys: {} needed",
                                         scratch, n_keys, one.scratch_bound()));
    }
    piece_rows = fit.rows;
  }

  const BufferRef& gate_or_q = a.has_gate ? gate : q;  // an unused binding still needs a buffer
  const float q_scale = static_cast<float>(a.scale * kLog2e);
  for (int64_t r0 = 0; r0 < a.n_rows; r0 += piece_rows) {
    const int64_t rows = std::min(piece_rows, a.n_rows - r0);
    const int64_t pos0 = a.pos0 + r0, row_base = a.row_base + r0;
    ASSIGN_OR_RETURN(const FlashPlan plan, plan_rows(info, whole, rows, tuning));
    const int64_t n_chunks = ceil_div(pos0 + rows, plan.chunk_keys);  // ≤ plan.n_chunks
    const struct {
      uint32_t n_head, group, n_rows, pos0, row_base, k_row_bytes, v_row_bytes, chunk_keys;
      float q_scale;
      uint32_t has_gate, gate_row_stride, gate_head_stride, gate_offset;
    } push{u32(a.n_head),      u32(a.n_head / a.n_head_kv), u32(rows),       u32(pos0),
           u32(row_base),      u32(k_row_bytes),            u32(v_row_bytes), u32(plan.chunk_keys),
           q_scale,            a.has_gate ? 1u : 0u,        u32(a.gate_row_stride), u32(a.gate_head_stride),
           u32(a.gate_offset)};
    const Spec spec{plan.workgroup_size, u32(a.hd), plan.lanes, plan.tile_keys, k_code, v_code};
    const Groups groups{.x = u32(plan.n_blocks), .y = u32(a.n_head_kv), .z = u32(n_chunks)};
    if (n_chunks == 1) {
      RETURN_IF_ERROR(dev.stream().dispatch("flash_attention", spec, {q, k_cache, v_cache, out, gate_or_q}, push, groups));
      continue;
    }
    // Partials as planned ([plan.n_chunks][rows][n_head]), of which the first n_chunks are used.
    CHECK(n_chunks <= plan.n_chunks && plan.scratch_bytes() <= scratch);
    const BufferRef part_o = partials.slice(0, plan.partial_o_bytes);
    const BufferRef part_ml = partials.slice(plan.partial_o_bytes, plan.partial_ml_bytes);
    RETURN_IF_ERROR(dev.stream().dispatch("flash_attention_split", spec, {q, k_cache, v_cache, part_o, part_ml}, push, groups));
    const struct {
      uint32_t n_head, n_rows, pos0, row_base, chunk_keys, n_chunks;
      uint32_t has_gate, gate_row_stride, gate_head_stride, gate_offset;
    } reduce_push{u32(a.n_head),          u32(rows),
                  u32(pos0),              u32(row_base),
                  u32(plan.chunk_keys),   u32(n_chunks),
                  a.has_gate ? 1u : 0u,   u32(a.gate_row_stride),
                  u32(a.gate_head_stride), u32(a.gate_offset)};
    const uint64_t n_vectors = static_cast<uint64_t>(rows * a.n_head);
    const uint32_t max_x = info.max_workgroup_count[0];
    const Groups reduce_groups = n_vectors <= max_x ? Groups{.x = u32(n_vectors)}
                                                    : Groups{.x = max_x, .y = u32((n_vectors + max_x - 1) / max_x)};
    RETURN_IF_ERROR(dev.stream().dispatch("flash_attention_reduce", Spec{kReduceThreads, u32(a.hd)},
                                          {part_o, part_ml, out, gate_or_q}, reduce_push, reduce_groups));
  }
  return Status::ok();
}

}  // namespace moetier::vk
