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

// The two kernel sets. kExact: the reference kernels, bit-identical to the CPU's scalar
// references where the arithmetic allows (one thread per row sums its blocks in order,
// byte loads, float-float sums); the test oracle, and `--gpu-kernels exact`. kFast (the
// default): kernels built for memory bandwidth (subgroups sharing a block, 32-bit loads,
// several rows and tokens per workgroup, tiles in shared memory, register-resident state);
// they differ from kExact by float rounding only, with tolerances derived in their tests.
enum class KernelSet { kFast, kExact };
const char* kernel_set_name(KernelSet k);

// y[t][y_offset + o] = W[o] · xq[t] for t < n_tok, o < n_out; y rows are y_stride floats
// apart. xq rows: gpu_activation_type(w.type), x_row_bytes apart. For a stack, matrix `mat`.
struct MatmulArgs {
  const GpuMatrix* w = nullptr;
  int64_t mat = 0;
  BufferRef xq;
  uint64_t x_row_bytes = 0;
  int64_t n_tok = 0;
  BufferRef y;
  int64_t y_stride = 0;
  int64_t y_offset = 0;
  bool accumulate = false;         // fast only: y += W·x (a fused residual add)
  const GpuMatrix* up = nullptr;   // fast only: y = silu(W·x) · (up·x) (fused SwiGLU; same shape as w)
};
// Stack products: for pair z < n_pairs, y[z][o] = W[ids[z]][o] · xq[rows[z]] (u32 buffers).
struct MatmulIdArgs {
  const GpuMatrix* w = nullptr;
  BufferRef xq;
  uint64_t x_row_bytes = 0;
  BufferRef ids, rows;
  int64_t n_pairs = 0;
  BufferRef y;
  int64_t y_stride = 0;
  const GpuMatrix* up = nullptr;   // fast only: fused SwiGLU (at most kMatvecMaxCols pairs)
  // Fast, prompt batches: scratch for grouping the pairs by expert on the GPU ([n_mat + 1]
  // and [n_pairs] u32), and the number of tokens the pairs come from (a token picks an
  // expert at most once, so it bounds the pairs per expert: the token tiles per expert).
  // Without them, or for few pairs, every pair is its own mat-vec.
  BufferRef group_offsets, group_order;
  int64_t n_rows_x = 0;
  bool grouped = false;  // group_offsets/order already hold these ids' grouping (a later stack of the same pairs)
};
Status matmul(Device& dev, KernelSet k, const MatmulArgs& a);
Status matmul_id(Device& dev, KernelSet k, const MatmulIdArgs& a);

// The kernels behind them. Exact: matmul.comp. Fast: matvec (up to kMatvecMaxCols tokens at
// once; more are done in groups) and the tiled matmat for prompt batches.
inline constexpr int64_t kMatvecMaxCols = 8;
Status matmul_exact(Device& dev, const MatmulArgs& a);
Status matmul_id_exact(Device& dev, const MatmulIdArgs& a);
Status matvec(Device& dev, const MatmulArgs& a);
Status matvec_id(Device& dev, const MatmulIdArgs& a);
// Prompt batches: tiles of 32 rows × 32 tokens; quantized weights bit-identical to the exact
// kernel. int_dot: packed int8 dot products (VK_KHR_shader_integer_dot_product; the default
// follows DeviceInfo::integer_dot_accelerated).
Status matmat(Device& dev, const MatmulArgs& a, bool int_dot);
// Whether matmat takes rows of w: whole steps of 256 values (64 for float weights). Rows
// that are not (small test models) go through the mat-vec, 8 tokens at a time.
bool matmat_supports(const GpuMatrix& w);
// The pairs grouped by expert (moe_group), then one tiled dispatch over (row tiles × token
// tiles × experts).
Status matmat_id(Device& dev, const MatmulIdArgs& a, bool int_dot);
// Sorts pair indices by expert: offsets [n_expert + 1], order [n_pairs].
Status moe_group(Device& dev, const BufferRef& ids, int64_t n_pairs, int64_t n_expert, const BufferRef& offsets,
                 const BufferRef& order);

}  // namespace moetier::vk

namespace moetier::vk {

// out = norm(x) per vector: n elements, vectors (row r, head h) at r·row_stride + h·head_stride
// (out: the out_ strides). RMS (w applied when not empty) or L2.
struct NormShape {
  int64_t n = 0, n_rows = 0, n_heads = 1;
  int64_t head_stride = 0, row_stride = 0, out_head_stride = 0, out_row_stride = 0;
  float eps = 1e-6f;
};
// The norm's output also converted to the CPU's activation blocks in the same dispatch
// (fast kernels; whole rows, n_heads = 1): Q8_K rows (n a multiple of 256) and/or Q8_0 rows,
// `*_stride` bytes apart, exactly what quantize_rows would make of `out`.
struct NormQuantOut {
  BufferRef q8_k;
  uint64_t q8_k_stride = 0;
  BufferRef q8_0;
  uint64_t q8_0_stride = 0;
};
Status rms_norm(Device& dev, const NormShape& s, const BufferRef& x, const BufferRef& w, const BufferRef& out,
                const NormQuantOut& quant = {});
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

// The fast delta rule (vk_ops_delta.cpp; shaders delta_rule_fast*.comp): delta_rule()'s
// result from the same buffers, with each head's state in registers for all tokens of a
// dispatch, a head's columns split across workgroups, and the gated RMSNorm as a second
// dispatch in place on y. It differs from delta_rule() only in float summation order (the
// d_k-long dot products, the norm's fp32 sum of squares), FMA contraction and rsqrt
// (tests/gpu/vk_delta_rule_test.cpp bounds the effect). Needs
// DeviceInfo::fast_kernels_supported(); d_k, d_v ≤ 256; key_dim = n_k_heads·d_k,
// value_dim = n_v_heads·d_v.
// Tuning: zeros choose the defaults (plan_delta_rule_fast); tests set them to cover
// other splits and the chunking of rows across dispatches.
struct DeltaRuleFastTuning {
  int64_t lanes_per_column = 0;       // invocations sharing one state column: 1, 2, 4 or 8, dividing d_k
  int64_t columns_per_group = 0;      // state columns per workgroup, dividing d_v
  int64_t tokens_per_stage = 0;       // tokens staged in shared memory per barrier
  int64_t max_rows_per_dispatch = 0;  // a cap below the loop budget's
};
// What delta_rule_fast() runs: the kernel's specialization and how rows go in dispatches.
struct DeltaRuleFastPlan {
  int64_t lanes_per_column = 0, columns_per_group = 0, tokens_per_stage = 0;
  int64_t workgroup_size = 0;      // columns_per_group · lanes_per_column invocations
  int64_t state_registers = 0;     // floats of state per invocation: d_k / lanes_per_column
  int64_t prefetch_registers = 0;  // floats of the next stage per invocation
  int64_t shared_bytes = 0;        // two stage buffers
  int64_t workgroups = 0;          // n_v_heads · d_v / columns_per_group
  int64_t rows_per_dispatch = 0;   // within kLoopBudget iterations per invocation
};
// Errors (bad input): shapes or tuning the kernel cannot run, naming what is wrong.
Result<DeltaRuleFastPlan> plan_delta_rule_fast(const DeviceInfo& info, const DeltaRuleDispatch& d,
                                               const DeltaRuleFastTuning& tuning = {});
Status delta_rule_fast(Device& dev, const DeltaRuleDispatch& d, const BufferRef& conv_out, const BufferRef& beta,
                       const BufferRef& alpha, const BufferRef& params, const BufferRef& state, const BufferRef& z,
                       const BufferRef& y, const DeltaRuleFastTuning& tuning = {});

// Softmax + top-k + renormalised weights per token (logits become probabilities in place);
// ids/weights/rows: [n_rows · k]. Both kernel sets compute the same probabilities and pick
// the same experts; the fast one picks them in parallel.
Status moe_router(Device& dev, KernelSet kernels, const BufferRef& logits, int64_t n_expert, int64_t k, int64_t n_rows,
                  const BufferRef& ids, const BufferRef& weights, const BufferRef& rows);
// out[t] = Σ_k w·e (when routed) + sigmoid(g)·shared (when shared); without routed, out
// already holds the routed sum. With a residual, x[t] += that sum instead (out not written).
// With a pair map (the VRAM expert cache) out holds the sum of the pairs computed on the
// CPU, and only the pairs the map names are added from `experts`.
struct MoeCombineArgs {
  BufferRef experts;      // [pairs][n_embd] expert outputs (has_routed)
  BufferRef weights;      // [n_rows·k] routing weights (has_routed)
  BufferRef shared;       // [n_rows][n_embd] shared expert outputs (has_shared)
  BufferRef shared_gate;  // [n_rows] its gate logits (has_shared)
  BufferRef out;          // [n_rows][n_embd]
  BufferRef residual;     // [n_rows][n_embd], optional
  BufferRef pair_map;     // [n_rows·k] i32, optional: the row of `experts` of each pair, −1 for the CPU's
  int64_t n_embd = 0, k = 0, n_rows = 0;
  bool has_routed = false, has_shared = false;
};
Status moe_combine(Device& dev, const MoeCombineArgs& a);

}  // namespace moetier::vk
