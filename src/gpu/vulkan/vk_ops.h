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

// Loop iterations one shader invocation may run in one dispatch, all its loops together.
// Mesa's llvmpipe (lavapipe, the CI's Vulkan device) counts every loop iteration of an
// invocation and silently ends all loops after 65,535 of them (a guard against endless
// shaders), so a longer dispatch computes wrong results without any error. Kernels whose
// loops grow with the number of tokens or keys split their work across dispatches or
// workgroups to stay within this budget (half the limit, for the small loops a kernel's
// estimate leaves out). Real GPUs have no such limit; the split costs them a few dispatches.
inline constexpr int64_t kLoopBudget = 32768;

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

namespace moetier::vk {

// out = norm(x) per vector: n elements, vectors (row r, head h) at r·row_stride + h·head_stride
// (out: the out_ strides). RMS (w applied when not empty) or L2.
struct NormShape {
  int64_t n = 0, n_rows = 0, n_heads = 1;
  int64_t head_stride = 0, row_stride = 0, out_head_stride = 0, out_row_stride = 0;
  float eps = 1e-6f;
};
Status rms_norm(Device& dev, const NormShape& s, const BufferRef& x, const BufferRef& w, const BufferRef& out);
Status l2_norm(Device& dev, const NormShape& s, const BufferRef& x, const BufferRef& out);

// NEOX rotation in place of n_heads heads per row (head_stride / row_stride floats) by the
// cos/sin table [n_rows][n_rot/2][2].
Status rope_neox(Device& dev, const BufferRef& x, int64_t n_rows, int64_t n_heads, int64_t head_stride,
                 int64_t row_stride, int64_t n_rot, const BufferRef& cos_sin);

struct RowsView {
  BufferRef buffer;
  int64_t stride = 0;  // floats between rows
  int64_t offset = 0;  // floats before row 0
};
// a += b over n_rows rows of n elements.
Status add(Device& dev, const RowsView& a, const RowsView& b, int64_t n, int64_t n_rows);
// out = silu(gate) · up.
Status silu_mul(Device& dev, const RowsView& gate, const RowsView& up, const RowsView& out, int64_t n, int64_t n_rows);

// f32 rows → a cache at positions first_row ... (cache rows of `width` elements of `type`:
// f32, f16, q8_0 or q4_0).
Status kv_store(Device& dev, const RowsView& src, int64_t n_rows, int64_t width, const BufferRef& cache,
                int64_t first_row, DType type);

struct AttentionDispatch {
  int64_t hd = 0, n_head = 0, n_head_kv = 0;
  int64_t n_rows = 0, row_base = 0, pos0 = 0;
  float scale = 1.0f;
  DType k_type = DType::F16, v_type = DType::F16;
  bool has_gate = false;
  int64_t gate_row_stride = 0, gate_head_stride = 0, gate_offset = 0;
};
// Rows are cut into chunks so the score scratch (scores.size bytes) is never exceeded.
Status attention(Device& dev, const AttentionDispatch& a, const BufferRef& q, const BufferRef& k_cache,
                 const BufferRef& v_cache, const BufferRef& scores, const BufferRef& out, const BufferRef& gate);

// Knobs of flash_attention (vk_ops_attention.cpp); 0 picks the device's default. They
// change speed and summation order, never what is computed.
struct FlashAttentionTuning {
  uint32_t lanes = 0;              // lanes per query vector: a power of 2, 4 ... subgroup size, ≤ hd / 4
  uint32_t tile_keys = 0;          // keys per shared-memory tile: a power of 2, 4 ... 64
  uint32_t workgroup_size = 0;     // invocations a prompt's workgroup aims for (whole rows of query vectors)
  uint32_t target_workgroups = 0;  // split-K cuts the keys until a dispatch has about this many workgroups
  int64_t min_chunk_keys = 0;      // ... but not into chunks of fewer keys than this
  int64_t max_chunk_keys = 0;      // keys per chunk at most (0: only the loop budget caps them); tests force split-K
};

// The same attention as attention() (same dispatch contract, inputs and output), computed
// as flash attention: no score scratch; K/V read once per GQA group and row block in tiles
// (straight from the cache: f32, f16, q8_0, q4_0); online softmax in f32, so results differ
// from attention()'s by summation order only. Needs DeviceInfo::fast_kernels_supported().
// Head dims 64, 128 or 256; n_head a multiple of n_head_kv (bad_input otherwise).
// Long key ranges are split over workgroups (split-K) that write (m, l, o) partials into
// `partials` (may be empty when no split is ever needed) and a second dispatch merges them;
// rows go in pieces when the partials do not fit, and an error says so when not even one
// row fits (flash_attention_scratch_bytes tells the size).
Status flash_attention(Device& dev, const AttentionDispatch& a, const BufferRef& q, const BufferRef& k_cache,
                       const BufferRef& v_cache, const BufferRef& partials, const BufferRef& out, const BufferRef& gate,
                       const FlashAttentionTuning& tuning = {});

// Bytes of `partials` that let flash_attention run any call with up to n_rows rows and up to
// max_keys keys (pos0 + n_rows ≤ max_keys) without cutting its rows into pieces on this
// device; 0 when it never splits. The size for n_rows = 1 is the least that works for every
// call up to max_keys (rows then go in pieces). Errors as flash_attention's for the shape.
Result<uint64_t> flash_attention_scratch_bytes(const DeviceInfo& info, int64_t n_rows, int64_t n_head,
                                               int64_t n_head_kv, int64_t max_keys, int64_t hd,
                                               const FlashAttentionTuning& tuning = {});

struct ConvDispatch {
  int64_t n_rows = 0, channels = 0, taps = 4, row_begin = 0;
};
Status ssm_conv(Device& dev, const ConvDispatch& c, const BufferRef& qkv, const BufferRef& weights,
                const BufferRef& state, const BufferRef& out);

struct DeltaRuleDispatch {
  int64_t n_rows = 0, row_begin = 0;
  int64_t dk = 0, dv = 0, n_k_heads = 0, n_v_heads = 0;
  int64_t channels = 0, key_dim = 0, value_dim = 0;
  float q_scale = 1.0f, eps = 1e-6f;
};
Status delta_rule(Device& dev, const DeltaRuleDispatch& d, const BufferRef& conv_out, const BufferRef& beta,
                  const BufferRef& alpha, const BufferRef& params, const BufferRef& state, const BufferRef& z,
                  const BufferRef& y);

// Softmax + top-k + renormalised weights per token (logits become probabilities in place);
// ids/weights/rows: [n_rows · k].
Status moe_router(Device& dev, const BufferRef& logits, int64_t n_expert, int64_t k, int64_t n_rows,
                  const BufferRef& ids, const BufferRef& weights, const BufferRef& rows);
// out[t] = Σ_k w·e (when routed) + sigmoid(g)·shared (when shared); without routed, out
// already holds the routed sum.
Status moe_combine(Device& dev, const BufferRef& experts, const BufferRef& weights, const BufferRef& shared,
                   const BufferRef& shared_gate, const BufferRef& out, int64_t n_embd, int64_t k, int64_t n_rows,
                   bool has_routed, bool has_shared);

}  // namespace moetier::vk
